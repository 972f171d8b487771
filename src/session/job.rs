//! One background job type for every long task of the GUI: the work runs on a
//! named thread, sends progress messages of type `P` and ends with a result of
//! type `R`; the UI polls it each frame and may ask it to stop. A [`Waker`]
//! (in the GUI: egui's repaint request) runs after each message, so the UI
//! need not poll on a timer. Nothing here knows egui.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The threads of jobs dropped while their work still ran. A process must not
/// exit with one of them inside a Vulkan call: the driver's and the layers'
/// exit handlers tear down what that thread is using (a crash at exit), so
/// the GUI waits for them when it closes ([`JoinDropped`]).
static DROPPED: Mutex<Vec<JoinHandle<()>>> = Mutex::new(Vec::new());

/// Waits up to `limit` for the threads of every dropped job to end (they were
/// asked to stop when dropped). True when none is left running.
pub fn wait_for_dropped(limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        let mut left = DROPPED.lock().unwrap_or_else(|e| e.into_inner());
        let (done, running): (Vec<_>, Vec<_>) = left.drain(..).partition(|h| h.is_finished());
        *left = running;
        let empty = left.is_empty();
        drop(left);
        for h in done {
            let _ = h.join();
        }
        if empty {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Held as the last field of whatever owns jobs (the GUI's app): when it
/// drops, after the jobs above it, it waits for their threads to end.
#[derive(Default)]
pub struct JoinDropped;

impl Drop for JoinDropped {
    fn drop(&mut self) {
        wait_for_dropped(Duration::from_secs(30));
    }
}

/// Called from the job's thread after every message (to request a repaint).
#[derive(Clone)]
pub struct Waker(Arc<dyn Fn() + Send + Sync>);

impl Waker {
    pub fn new(f: impl Fn() + Send + Sync + 'static) -> Waker {
        Waker(Arc::new(f))
    }

    /// A waker that does nothing (tests, command-line use).
    pub fn none() -> Waker {
        Waker::new(|| {})
    }

    pub fn wake(&self) {
        (self.0)()
    }
}

/// What the work sees: a way to report progress and the cancel flag.
pub struct Reporter<P> {
    tx: Sender<P>,
    cancel: Arc<AtomicBool>,
    wake: Waker,
}

impl<P> Reporter<P> {
    /// Sends one progress message; false when nobody listens any more (the
    /// job was dropped), which the work may take as a reason to stop.
    pub fn progress(&self, p: P) -> bool {
        let ok = self.tx.send(p).is_ok();
        self.wake.wake();
        ok
    }

    /// True once the UI asked the job to stop (or dropped it).
    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    /// The cancel flag itself, for library functions that take one.
    pub fn cancel_flag(&self) -> &AtomicBool {
        &self.cancel
    }
}

/// The job's thread ended without a result: the work panicked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the {0} thread ended without a result")]
pub struct Lost(pub &'static str);

/// What one poll found: the progress messages that arrived, in order, and the
/// result once the work ended.
pub struct Polled<P, R> {
    pub progress: Vec<P>,
    pub done: Option<Result<R, Lost>>,
}

/// A task running on its own thread. Dropping it raises the cancel flag and
/// does not wait for the thread; [`wait_for_dropped`] does.
pub struct Job<P, R> {
    name: &'static str,
    thread: Option<JoinHandle<()>>,
    progress: Receiver<P>,
    result: Receiver<R>,
    cancel: Arc<AtomicBool>,
    started: Instant,
    finished: bool,
}

impl<P: Send + 'static, R: Send + 'static> Job<P, R> {
    /// Runs `work` on a thread named `dualscope-{name}`; `wake` runs after
    /// every progress message and after the result. An error only when the
    /// thread cannot be started (callers word it for their task).
    pub fn spawn(
        name: &'static str,
        wake: Waker,
        work: impl FnOnce(&Reporter<P>) -> R + Send + 'static,
    ) -> std::io::Result<Job<P, R>> {
        let (ptx, progress) = channel();
        let (rtx, result) = channel();
        let cancel = Arc::new(AtomicBool::new(false));
        let reporter = Reporter { tx: ptx, cancel: cancel.clone(), wake };
        let thread = std::thread::Builder::new().name(format!("dualscope-{name}")).spawn(move || {
            let r = work(&reporter);
            let _ = rtx.send(r);
            reporter.wake.wake();
        })?;
        Ok(Job { name, thread: Some(thread), progress, result, cancel, started: Instant::now(), finished: false })
    }
}

impl<P, R> Job<P, R> {
    /// The progress that arrived and, once, the result. After the result (or
    /// the loss of the thread) every further poll finds nothing.
    pub fn poll(&mut self) -> Polled<P, R> {
        if self.finished {
            return Polled { progress: Vec::new(), done: None };
        }
        // The result first: the work sent all its progress before it, so the
        // drain below cannot miss a message that preceded the result.
        let done = match self.result.try_recv() {
            Ok(r) => Some(Ok(r)),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => Some(Err(Lost(self.name))),
        };
        self.finished = done.is_some();
        Polled { progress: self.progress.try_iter().collect(), done }
    }

    /// Asks the work to stop (it sees [`Reporter::cancelled`]).
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    /// True until the result (or the loss of the thread) has been polled.
    pub fn is_running(&self) -> bool {
        !self.finished
    }

    pub fn started(&self) -> Instant {
        self.started
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

impl<P, R> Drop for Job<P, R> {
    fn drop(&mut self) {
        self.cancel();
        if let Some(t) = self.thread.take() {
            if t.is_finished() {
                let _ = t.join();
            } else {
                DROPPED.lock().unwrap_or_else(|e| e.into_inner()).push(t);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait<P, R>(job: &mut Job<P, R>) -> (Vec<P>, Result<R, Lost>) {
        let mut seen = Vec::new();
        loop {
            let p = job.poll();
            seen.extend(p.progress);
            if let Some(r) = p.done {
                return (seen, r);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn progress_then_result_in_order() {
        let woken = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let w = woken.clone();
        let mut job = Job::spawn("test", Waker::new(move || _ = w.fetch_add(1, Ordering::Relaxed)), |r| {
            for i in 0..100 {
                r.progress(i);
            }
            "done"
        })
        .unwrap();
        let (seen, r) = wait(&mut job);
        assert_eq!(seen, (0..100).collect::<Vec<_>>());
        assert_eq!(r, Ok("done"));
        assert_eq!(woken.load(Ordering::Relaxed), 101);
        assert!(!job.is_running());
        assert!(job.poll().done.is_none(), "the result comes once");
    }

    #[test]
    fn cancel_reaches_the_work() {
        let mut job = Job::<(), u32>::spawn("test", Waker::none(), |r| {
            let mut n = 0;
            while !r.cancelled() {
                n += 1;
                std::thread::yield_now();
            }
            n
        })
        .unwrap();
        job.cancel();
        assert!(wait(&mut job).1.is_ok());
    }

    #[test]
    fn a_dropped_job_is_asked_to_stop_and_waited_for() {
        let ended = Arc::new(AtomicBool::new(false));
        let e = ended.clone();
        let job = Job::<(), ()>::spawn("dropped", Waker::none(), move |r| {
            while !r.cancelled() {
                std::thread::sleep(Duration::from_millis(1));
            }
            std::thread::sleep(Duration::from_millis(50));
            e.store(true, Ordering::SeqCst);
        })
        .unwrap();
        drop(job);
        assert!(wait_for_dropped(Duration::from_secs(10)));
        assert!(ended.load(Ordering::SeqCst), "the wait returned before the thread ended");
    }

    #[test]
    fn a_panic_is_a_lost_result() {
        let mut job = Job::<(), ()>::spawn("doomed", Waker::none(), |_| panic!("on purpose")).unwrap();
        let (_, r) = wait(&mut job);
        assert_eq!(r.unwrap_err().to_string(), "the doomed thread ended without a result");
    }
}
