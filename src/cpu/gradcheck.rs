//! Finite-difference checks in float64 of every backward op and of the whole
//! model, plus the invariants the contract states (padding, loss scale).

use super::attention::{attention, attention_backward};
use super::backward::{dlogits, gru_layer_backward};
use super::forward::{gru_layer, token_losses};
use super::*;
use crate::model::{GruLayer, param_specs};
use crate::rng::Rng;
use crate::tensor::Tensor;

const EPS: f64 = 1e-6;

fn randv(rng: &mut Rng, n: usize, scale: f64) -> Vec<f64> {
    (0..n).map(|_| rng.normal() * scale).collect()
}

fn close(what: &str, i: usize, analytic: f64, numeric: f64) {
    let tol = 1e-7 + 1e-5 * analytic.abs().max(numeric.abs());
    assert!(
        (analytic - numeric).abs() <= tol,
        "{what}[{i}]: analytic {analytic:.10e} vs finite difference {numeric:.10e}"
    );
}

/// Central differences of `f` with respect to every element of `x[idx]`.
fn fd_check(what: &str, x: &mut [f64], analytic: &[f64], f: &mut dyn FnMut(&[f64]) -> f64) {
    assert_eq!(x.len(), analytic.len(), "{what}: length");
    for i in 0..x.len() {
        let keep = x[i];
        x[i] = keep + EPS;
        let up = f(x);
        x[i] = keep - EPS;
        let down = f(x);
        x[i] = keep;
        close(what, i, analytic[i], (up - down) / (2.0 * EPS));
    }
}

fn batch_of(lens: &[usize], seed: u64) -> Batch {
    let mut rng = Rng::new(seed);
    let rows: Vec<Vec<u8>> = lens.iter().map(|&l| (0..l).map(|_| rng.below(256) as u8).collect()).collect();
    Batch::from_rows(&rows).unwrap()
}

#[test]
fn loss_op_dlogits() {
    let mut rng = Rng::new(1);
    let batch = batch_of(&[6, 3, 1], 2);
    let n = batch.num_targets() as f64;
    let v = 256;
    let mut logits = randv(&mut rng, batch.t * batch.rows * v, 3.0);
    let analytic = dlogits(&logits, &batch, v, 1.0 / n);
    let mut loss = |l: &[f64]| token_losses(l, &batch, v).iter().sum::<f64>() / n;
    fd_check("dlogits", &mut logits, &analytic, &mut loss);
}

fn attention_case(window: usize, t: usize, seed: u64) {
    let mut cfg = Config::tiny();
    cfg.window = window;
    cfg.attn_dim = 6;
    cfg.heads = 2;
    let (bb, a) = (2, cfg.attn_dim);
    let mut rng = Rng::new(seed);
    let n = t * bb * a;
    let (mut q, mut k, mut v) = (randv(&mut rng, n, 1.0), randv(&mut rng, n, 1.0), randv(&mut rng, n, 1.0));
    let r = randv(&mut rng, n, 1.0);
    let (attn, _) = attention(&cfg, &q, &k, &v, t, bb);
    let (dq, dk, dv) = attention_backward(&cfg, &q, &k, &v, &attn, &r, t, bb);
    let obj = |c: Vec<f64>| c.iter().zip(&r).map(|(x, y)| x * y).sum::<f64>();
    let (k0, v0) = (k.clone(), v.clone());
    fd_check("attn dq", &mut q, &dq, &mut |q| obj(attention(&cfg, q, &k0, &v0, t, bb).1));
    let q0 = q.clone();
    fd_check("attn dk", &mut k, &dk, &mut |k| obj(attention(&cfg, &q0, k, &v0, t, bb).1));
    fd_check("attn dv", &mut v, &dv, &mut |v| obj(attention(&cfg, &q0, &k0, v, t, bb).1));
}

#[test]
fn attention_op_window_shorter_than_sequence() {
    attention_case(3, 7, 3);
}

#[test]
fn attention_op_window_longer_than_sequence() {
    attention_case(10, 4, 4);
}

#[test]
fn attention_weights_sum_to_one_over_the_window() {
    let mut cfg = Config::tiny();
    cfg.window = 3;
    let (t, bb) = (6, 2);
    let mut rng = Rng::new(5);
    let n = t * bb * cfg.attn_dim;
    let (q, k, v) = (randv(&mut rng, n, 1.0), randv(&mut rng, n, 1.0), randv(&mut rng, n, 1.0));
    let (attn, _) = attention(&cfg, &q, &k, &v, t, bb);
    let w = cfg.window;
    for (i, row) in attn.chunks(w).enumerate() {
        let tpos = i / (bb * cfg.heads);
        let valid = (tpos + 1).min(w);
        assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!(row[..w - valid].iter().all(|&x| x == 0.0), "slots before the row start hold 0");
        assert!(row[w - valid..].iter().all(|&x| x > 0.0));
    }
}

#[test]
fn gru_layer_op() {
    let (h, n_in, t, bb) = (5, 4, 6, 3);
    let mut rng = Rng::new(6);
    let mut layer = GruLayer {
        w_ih: Tensor::from_vec(&[3 * h, n_in], randv(&mut rng, 3 * h * n_in, 0.5)),
        w_hh: Tensor::from_vec(&[3 * h, h], randv(&mut rng, 3 * h * h, 0.5)),
        b_ih: Tensor::from_vec(&[3 * h], randv(&mut rng, 3 * h, 0.5)),
        b_hh: Tensor::from_vec(&[3 * h], randv(&mut rng, 3 * h, 0.5)),
    };
    let mut input = randv(&mut rng, t * bb * n_in, 1.0);
    let r = randv(&mut rng, t * bb * h, 1.0);
    let f = gru_layer(&layer, &input, t, bb, n_in, h);
    let mut grad = GruLayer {
        w_ih: Tensor::zeros(&[3 * h, n_in]),
        w_hh: Tensor::zeros(&[3 * h, h]),
        b_ih: Tensor::zeros(&[3 * h]),
        b_hh: Tensor::zeros(&[3 * h]),
    };
    let gb = gru_layer_backward(&layer, &mut grad, &f, &input, r.clone(), t, bb, n_in, h);
    let obj = |hs: &[f64]| hs.iter().zip(&r).map(|(x, y)| x * y).sum::<f64>();
    let l0 = layer.clone();
    fd_check("gru d_in", &mut input, &gb.d_in, &mut |x| obj(&gru_layer(&l0, x, t, bb, n_in, h).h));
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
            obj(&gru_layer(&l, &inp, t, bb, n_in, h).h)
        });
    }
}

/// Every parameter of the whole model against central differences of the loss.
fn whole_model_case(cfg: &Config, lens: &[usize], seed: u64) {
    let mut params = Params::<f64>::init(cfg, seed);
    // Scale the embedding down so the GRU is not saturated and the test is sharp.
    params.embed.data.iter_mut().for_each(|x| *x *= 0.5);
    let batch = batch_of(lens, seed + 100);
    let g = grads(cfg, &params, &batch, None).unwrap();
    let used: Vec<bool> = (0..256)
        .map(|x| (0..batch.rows).any(|b| (0..batch.t).any(|t| batch.mask(b, t) && batch.input(b, t) as usize == x)))
        .collect();
    let names: Vec<String> = param_specs(cfg).into_iter().map(|(n, _)| n).collect();
    for (ti, name) in names.iter().enumerate() {
        let analytic = g.grads.tensors()[ti].data.clone();
        let mut x = params.tensors()[ti].data.clone();
        for i in 0..x.len() {
            if ti == 0 && !used[i / cfg.d_embed] {
                assert_eq!(analytic[i], 0.0, "embedding row {} is unused: its gradient must be 0", i / cfg.d_embed);
                continue;
            }
            let keep = x[i];
            let mut eval = |val: f64| {
                x[i] = val;
                let mut p = params.clone();
                p.tensors_mut()[ti].data.copy_from_slice(&x);
                forward(cfg, &p, &batch).unwrap().loss
            };
            let num = (eval(keep + EPS) - eval(keep - EPS)) / (2.0 * EPS);
            x[i] = keep;
            close(name, i, analytic[i], num);
        }
    }
}

#[test]
fn whole_model_padded_rows_and_one_token_row() {
    // T = 7 > W = 3; rows of 8, 5 and 1 tokens (the last has no target).
    whole_model_case(&Config::tiny(), &[8, 5, 1], 11);
}

#[test]
fn whole_model_window_longer_than_sequence() {
    let mut cfg = Config::tiny();
    cfg.window = 10;
    cfg.layers = 1;
    whole_model_case(&cfg, &[5, 4], 12);
}

#[test]
fn padding_does_not_change_valid_positions() {
    let cfg = Config::tiny();
    let p = Params::<f64>::init(&cfg, 3);
    let a: Vec<u8> = b"hello".to_vec();
    let alone = forward(&cfg, &p, &Batch::from_rows(std::slice::from_ref(&a)).unwrap()).unwrap();
    let padded = forward(&cfg, &p, &Batch::from_rows(&[a.clone(), b"a much longer row".to_vec()]).unwrap()).unwrap();
    let v = cfg.vocab;
    for t in 0..a.len() - 1 {
        let x = &alone.logits[t * v..(t + 1) * v];
        let y = &padded.logits[(t * 2) * v..(t * 2 + 1) * v];
        // Equal up to GEMM blocking order (the batch shapes differ).
        for (u, w) in x.iter().zip(y) {
            assert!((u - w).abs() < 1e-12, "position {t}: {u} vs {w}");
        }
    }
    // The mean runs over valid positions only.
    let manual: f64 = padded.token_loss.iter().sum::<f64>() / (4 + 16) as f64;
    assert!((padded.loss - manual).abs() < 1e-12);
    assert_eq!(padded.n_targets, 20);
}

#[test]
fn loss_scale_scales_gradients_exactly() {
    let cfg = Config::tiny();
    let p = Params::<f32>::init(&cfg, 4);
    let batch = batch_of(&[8, 6], 5);
    let f = forward(&cfg, &p, &batch).unwrap();
    let g1 = backward(&cfg, &p, &batch, &f, 1.0, None);
    let g2 = backward(&cfg, &p, &batch, &f, 1024.0, None);
    for (a, b) in g1.grads.tensors().iter().zip(g2.grads.tensors()) {
        for (x, y) in a.data.iter().zip(&b.data) {
            assert_eq!(*x * 1024.0, *y);
        }
    }
}

#[test]
fn per_token_guard_caps_only_w_ctx() {
    let cfg = Config::tiny();
    let p = Params::<f64>::init(&cfg, 8);
    let batch = batch_of(&[8, 6], 9);
    let f = forward(&cfg, &p, &batch).unwrap();
    let free = backward(&cfg, &p, &batch, &f, 1.0, None);
    let loose = backward(&cfg, &p, &batch, &f, 1.0, Some(1e9));
    assert_eq!(loose.capped, 0);
    assert_eq!(loose.grads, free.grads);
    // Cap at the median contribution: about half the positions are capped.
    let mut norms: Vec<f64> = free.ctx_token_norm.iter().copied().filter(|&x| x > 0.0).collect();
    norms.sort_by(f64::total_cmp);
    let tau = norms[norms.len() / 2];
    let capped = backward(&cfg, &p, &batch, &f, 1.0, Some(tau));
    let expect_count = free.ctx_token_norm.iter().filter(|&&x| x > tau).count();
    assert_eq!(capped.capped, expect_count);
    assert!(expect_count > 0);
    // Independent recomputation of Σ_t f_t g_t c_tᵀ.
    let (v, a) = (cfg.vocab, cfg.attn_dim);
    let mut want = vec![0.0; v * a];
    for pos in 0..batch.t * batch.rows {
        let g = &free.dlogits[pos * v..(pos + 1) * v];
        let c = &f.c[pos * a..(pos + 1) * a];
        let gn = g.iter().map(|x| x * x).sum::<f64>().sqrt();
        let cn = c.iter().map(|x| x * x).sum::<f64>().sqrt();
        let fac = if gn * cn > tau { tau / (gn * cn) } else { 1.0 };
        for i in 0..v {
            for j in 0..a {
                want[i * a + j] += fac * g[i] * c[j];
            }
        }
    }
    for (x, y) in capped.grads.head_ctx.data.iter().zip(&want) {
        assert!((x - y).abs() < 1e-12);
    }
    assert_eq!(capped.grads.head_tok, free.grads.head_tok);
    assert_eq!(capped.grads.gru, free.grads.gru);
    assert_eq!(capped.d_c, free.d_c);
}

#[test]
fn f32_agrees_with_f64() {
    let cfg = Config::small();
    let p64 = Params::<f64>::init(&cfg, 10);
    let p32 = p64.cast::<f32>();
    let batch = batch_of(&[40, 33, 17], 11);
    let g64 = grads(&cfg, &p64, &batch, None).unwrap();
    let g32 = grads(&cfg, &p32, &batch, None).unwrap();
    assert!((g64.loss - g32.loss).abs() / g64.loss < 1e-6);
    for ((name, a), b) in g64.grads.named(&cfg).into_iter().zip(g32.grads.tensors()) {
        let num: f64 = a.data.iter().zip(&b.data).map(|(x, y)| (x - *y as f64).powi(2)).sum::<f64>().sqrt();
        let den = a.sum_sq_f64().sqrt();
        assert!(num <= 1e-4 * den, "{name}: relative L2 {}", num / den);
    }
}
