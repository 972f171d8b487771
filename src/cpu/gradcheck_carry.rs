//! Finite-difference checks in float64 of the backward ops a carried state
//! changes (the recurrence from `h_{-1} = h0`, attention over a prefix, the
//! whole model from a carried state), and chunked passes against one whole pass.

use super::attention::{Prefix, attention, attention_backward_with, attention_with};
use super::backward::gru_layer_backward_from;
use super::forward::gru_layer_from;
use super::*;
use crate::model::{GruLayer, param_specs};
use crate::rng::Rng;
use crate::tensor::Tensor;

const EPS: f64 = 1e-6;

fn randv(rng: &mut Rng, n: usize, scale: f64) -> Vec<f64> {
    (0..n).map(|_| rng.normal() * scale).collect()
}

/// Central differences of `f` against `analytic` for every element of `x`.
fn fd_check(what: &str, x: &mut [f64], analytic: &[f64], f: &mut dyn FnMut(&[f64]) -> f64) {
    assert_eq!(x.len(), analytic.len(), "{what}: length");
    for i in 0..x.len() {
        let keep = x[i];
        x[i] = keep + EPS;
        let up = f(x);
        x[i] = keep - EPS;
        let down = f(x);
        x[i] = keep;
        let (a, n) = (analytic[i], (up - down) / (2.0 * EPS));
        let tol = 1e-7 + 1e-5 * a.abs().max(n.abs());
        assert!((a - n).abs() <= tol, "{what}[{i}]: analytic {a:.10e} vs finite difference {n:.10e}");
    }
}

/// A random state of `p` prefix positions for `rows` rows.
fn random_carry(cfg: &Config, rows: usize, p: usize, seed: u64) -> Carry<f64> {
    let mut rng = Rng::new(seed);
    let bh = rows * cfg.hidden;
    Carry {
        rows,
        hidden: cfg.hidden,
        h0: (0..cfg.layers).map(|_| randv(&mut rng, bh, 0.6)).collect(),
        prefix: randv(&mut rng, p * bh, 0.6),
        prefix_len: p,
    }
}

fn batch_of(lens: &[usize], seed: u64) -> Batch {
    let mut rng = Rng::new(seed);
    let rows: Vec<Vec<u8>> = lens.iter().map(|&l| (0..l).map(|_| rng.below(256) as u8).collect()).collect();
    Batch::from_rows(&rows).unwrap()
}

/// Attention over a prefix: q, k, v and the prefix's k, v against finite differences.
#[test]
fn attention_with_prefix_op() {
    let mut cfg = Config::tiny();
    cfg.window = 4;
    let (t, bb, np) = (5, 2, 3);
    let mut rng = Rng::new(21);
    let (n, npre) = (t * bb * cfg.attn_dim, np * bb * cfg.attn_dim);
    let (mut q, mut k, mut v) = (randv(&mut rng, n, 1.0), randv(&mut rng, n, 1.0), randv(&mut rng, n, 1.0));
    let (mut kp, mut vp) = (randv(&mut rng, npre, 1.0), randv(&mut rng, npre, 1.0));
    let r = randv(&mut rng, n, 1.0);
    let obj = |c: Vec<f64>| c.iter().zip(&r).map(|(x, y)| x * y).sum::<f64>();
    let run = |q: &[f64], k: &[f64], v: &[f64], kp: &[f64], vp: &[f64]| {
        attention_with(&cfg, q, k, v, &Prefix { k: kp, v: vp, len: np }, t, bb)
    };
    let (attn, _) = run(&q, &k, &v, &kp, &vp);
    let pre = Prefix { k: &kp, v: &vp, len: np };
    let g = attention_backward_with(&cfg, &q, &k, &v, &pre, &attn, &r, t, bb);
    let (q0, k0, v0, kp0, vp0) = (q.clone(), k.clone(), v.clone(), kp.clone(), vp.clone());
    fd_check("dq", &mut q, &g.dq, &mut |x| obj(run(x, &k0, &v0, &kp0, &vp0).1));
    fd_check("dk", &mut k, &g.dk, &mut |x| obj(run(&q0, x, &v0, &kp0, &vp0).1));
    fd_check("dv", &mut v, &g.dv, &mut |x| obj(run(&q0, &k0, x, &kp0, &vp0).1));
    fd_check("dk_pre", &mut kp, &g.dk_pre, &mut |x| obj(run(&q0, &k0, &v0, x, &vp0).1));
    fd_check("dv_pre", &mut vp, &g.dv_pre, &mut |x| obj(run(&q0, &k0, &v0, &kp0, x).1));
    // Query t sees min(W, P + t + 1) keys: the prefix is in the buffer.
    let w = cfg.window;
    for (i, row) in attn.chunks(w).enumerate() {
        let valid = (np + i / (bb * cfg.heads) + 1).min(w);
        assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!(row[w - valid..].iter().all(|&x| x > 0.0), "slot of a prefix key is empty");
    }
    // An empty prefix is today's attention exactly.
    let plain = attention(&cfg, &q0, &k0, &v0, t, bb);
    assert_eq!(plain, attention_with(&cfg, &q0, &k0, &v0, &Prefix::empty(), t, bb));
}

/// One GRU layer from a non-zero `h_{-1}`: the input and every parameter
/// (the `t = 0` term of `dW_hh` included) against finite differences.
#[test]
fn gru_layer_from_h0_op() {
    let (h, n_in, t, bb) = (5, 4, 6, 3);
    let mut rng = Rng::new(26);
    let mut layer = GruLayer {
        w_ih: Tensor::from_vec(&[3 * h, n_in], randv(&mut rng, 3 * h * n_in, 0.5)),
        w_hh: Tensor::from_vec(&[3 * h, h], randv(&mut rng, 3 * h * h, 0.5)),
        b_ih: Tensor::from_vec(&[3 * h], randv(&mut rng, 3 * h, 0.5)),
        b_hh: Tensor::from_vec(&[3 * h], randv(&mut rng, 3 * h, 0.5)),
    };
    let h0 = randv(&mut rng, bb * h, 0.8);
    let mut input = randv(&mut rng, t * bb * n_in, 1.0);
    let r = randv(&mut rng, t * bb * h, 1.0);
    let fwd = |l: &GruLayer<f64>, x: &[f64]| gru_layer_from(l, x, Some(&h0), t, bb, n_in, h);
    let f = fwd(&layer, &input);
    let mut grad = GruLayer {
        w_ih: Tensor::zeros(&[3 * h, n_in]),
        w_hh: Tensor::zeros(&[3 * h, h]),
        b_ih: Tensor::zeros(&[3 * h]),
        b_hh: Tensor::zeros(&[3 * h]),
    };
    let gb = gru_layer_backward_from(&layer, &mut grad, &f, &input, Some(&h0), r.clone(), t, bb, n_in, h);
    let obj = |hs: &[f64]| hs.iter().zip(&r).map(|(x, y)| x * y).sum::<f64>();
    let l0 = layer.clone();
    fd_check("gru d_in", &mut input, &gb.d_in, &mut |x| obj(&fwd(&l0, x).h));
    let inp = input.clone();
    type Pick = fn(&mut GruLayer<f64>) -> &mut Vec<f64>;
    let picks: [(&str, Pick, &Vec<f64>); 4] = [
        ("gru d_w_ih", |l| &mut l.w_ih.data, &grad.w_ih.data),
        ("gru d_w_hh", |l| &mut l.w_hh.data, &grad.w_hh.data),
        ("gru d_b_ih", |l| &mut l.b_ih.data, &grad.b_ih.data),
        ("gru d_b_hh", |l| &mut l.b_hh.data, &grad.b_hh.data),
    ];
    for (what, pick, analytic) in picks {
        let mut x = pick(&mut layer).clone();
        fd_check(what, &mut x, analytic, &mut |x| {
            let mut l = layer.clone();
            pick(&mut l).copy_from_slice(x);
            obj(&fwd(&l, &inp).h)
        });
    }
}

/// Every parameter of the whole model from a carried state (h0 in both
/// layers, a prefix of W − 1 states) against central differences of the loss.
#[test]
fn whole_model_from_carried_state() {
    let mut cfg = Config::tiny();
    cfg.window = 4;
    let mut params = Params::<f64>::init(&cfg, 31);
    params.embed.data.iter_mut().for_each(|x| *x *= 0.5);
    let batch = batch_of(&[6, 5], 32);
    let carry = random_carry(&cfg, batch.rows, cfg.window - 1, 33);
    let (g, _) = grads_with(&cfg, &params, &batch, None, Some(&carry)).unwrap();
    let names: Vec<String> = param_specs(&cfg).into_iter().map(|(n, _)| n).collect();
    for (ti, name) in names.iter().enumerate().skip(1) {
        let analytic = g.grads.tensors()[ti].data.clone();
        let mut x = params.tensors()[ti].data.clone();
        fd_check(name, &mut x, &analytic, &mut |x| {
            let mut p = params.clone();
            p.tensors_mut()[ti].data.copy_from_slice(x);
            forward_with(&cfg, &p, &batch, Some(&carry)).unwrap().loss
        });
    }
    // Without the prefix's share of dW_k and dW_v the gradient would be off.
    let (plain, _) =
        grads_with(&cfg, &params, &batch, None, Some(&Carry { prefix: vec![], prefix_len: 0, ..carry })).unwrap();
    assert_ne!(plain.grads.k, g.grads.k);
}

/// One pass over K·T tokens equals K passes of T with the state carried, and
/// the state after the last chunk is the whole pass's at that position.
#[test]
fn chunked_equals_whole_in_f64() {
    let mut cfg = Config::tiny();
    cfg.window = 4;
    let (k, t) = (3, 5);
    let p = Params::<f64>::init(&cfg, 41);
    let mut rng = Rng::new(42);
    let row: Vec<u8> = (0..k * t + 1).map(|_| rng.below(256) as u8).collect();
    let whole = forward(&cfg, &p, &Batch::from_rows(std::slice::from_ref(&row)).unwrap()).unwrap();
    let v = cfg.vocab;
    let mut carry: Option<Carry<f64>> = None;
    for c in 0..k {
        let chunk = Batch::from_rows(&[row[c * t..c * t + t + 1].to_vec()]).unwrap();
        let f = forward_with(&cfg, &p, &chunk, carry.as_ref()).unwrap();
        let want = &whole.logits[c * t * v..(c + 1) * t * v];
        for (i, (x, y)) in f.logits.iter().zip(want).enumerate() {
            assert!((x - y).abs() < 1e-12, "chunk {c}, position {}: {x} vs {y}", i / v);
        }
        // The first W − 1 positions of a later chunk differ from a pass from zero.
        if c > 0 {
            let fresh = forward(&cfg, &p, &chunk).unwrap();
            assert!(fresh.logits[..v].iter().zip(&f.logits[..v]).any(|(a, b)| (a - b).abs() > 1e-6));
        }
        carry = Some(f.final_state(&cfg));
    }
    let last = carry.unwrap();
    assert_eq!(last.prefix_len, cfg.window - 1);
    let h = cfg.hidden;
    assert_eq!(last.h0[1], whole.gru[1].h[(k * t - 1) * h..k * t * h].to_vec());
    assert_eq!(last.prefix, whole.s()[(k * t - cfg.window + 1) * h..].to_vec());
}

/// An empty state is today's model bit for bit, forward and backward.
#[test]
fn empty_state_is_todays_model() {
    let cfg = Config::tiny();
    let p = Params::<f32>::init(&cfg, 51);
    let batch = batch_of(&[8, 6], 52);
    let zero = Carry::zeros(&cfg, batch.rows);
    let a = grads(&cfg, &p, &batch, None).unwrap();
    let (b, next) = grads_with(&cfg, &p, &batch, None, Some(&zero)).unwrap();
    assert_eq!(a.loss, b.loss);
    assert_eq!(a.grads, b.grads);
    assert_eq!(next.prefix_len, cfg.window - 1);
    let wrong = Carry::<f32>::zeros(&cfg, batch.rows + 1);
    assert!(matches!(forward_with(&cfg, &p, &batch, Some(&wrong)), Err(CpuError::Carry(CarryError::Shape { .. }))));
    let long = Carry { prefix: vec![0.5; cfg.window * batch.rows * cfg.hidden], prefix_len: cfg.window, ..zero };
    assert!(matches!(forward_with(&cfg, &p, &batch, Some(&long)), Err(CpuError::Carry(_))));
}
