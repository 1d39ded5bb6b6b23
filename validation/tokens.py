"""A trained Transformer's tokens, layer by layer, and the mean-field dynamics with its weights.

.. autosummary::
   builtin_corpus
   cloud_statistics
   token_study
   dynamics_study
   fit_toy_beta
   summary_table
   dynamics_table
   plot_figure1
   plot_summary
   plot_dynamics

Figure 1 of the first paper (docs/equations.md section 5), with a real model: the hidden
states of every layer of a trained encoder (:func:`particles.trained.load_minilm`), their
tokens normalised to the unit sphere (``y_i = x_i / |x_i|``, the layer normalisation of the
toy model), and per layer the histogram of ``<y_i, y_j>`` (``i < j``), the mean inner
product, the fraction of pairs above ``0.9``, the number of clusters (components of
``<y_i, y_j> >= 1 - delta``), the energies ``E_beta`` (docs/equations.md section 2) and the
effective rank (Roy and Vetterli: ``exp`` of the entropy of the normalised singular values).

:func:`dynamics_study` starts from the real layer-0 cloud of a passage and integrates the
particle system on the sphere whose parameters during ``t in [l - 1, l]`` are layer ``l``'s
trained attention (:meth:`particles.trained.Encoder.layer_model`, biases dropped), in three
variants (:data:`DYNAMICS`): ``attention`` (continuous time, RK4), ``post_ln`` (one discrete
Post-LN step ``y <- normalize(y + attn(y))`` per layer) and ``post_ln+ff`` (the network's two
sublayers, attention then the trained feed-forward, each followed by the normalisation; biases
and LayerNorm gains dropped); it compares each with the real layers (W1 between the
inner-product distributions, kernel distance between the clouds, clustering metrics) and fits
one ``beta`` per layer of the toy model ``Q = K = V = I`` (:func:`fit_toy_beta`).
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Sequence
from importlib import resources
from typing import Any

import numpy as np
import xarray as xr
from scipy.optimize import minimize_scalar
from scipy.stats import wasserstein_distance

from meanfield import Model, Schedule
from meanfield.finite import energy_variables, note_nonfinite
from meanfield.integrate import ConstantStep, RungeKutta, StopReason, integrate, result_attrs
from meanfield.metrics import kernel_distance_particle_sets
from particles import count_clusters, pairwise_inner_products, project_tangent, simulate
from particles.integrators import normalize_rows
from particles.observables import energies

DEFAULTS: dict[str, Any] = {
    "bins": 40,
    "betas": (1.0, 4.0, 9.0),
    "delta": 0.1,
    "dt": 0.25,
    "fit_dt": 0.5,
    "kernel_beta": 1.0,
    "beta_bounds": (0.0, 30.0),
}
"""Defaults of the studies: histogram bins on ``[-1, 1]``; ``beta`` of the energies; cluster
threshold ``delta`` (pairs with ``<y_i, y_j> >= 1 - delta`` are linked; ``0.1`` matches the
"fraction above 0.9"); RK4 step of the dynamics (per unit of time = one layer); ``beta`` of
the kernel distance; search interval and RK4 step of the toy fit (the fitted ``beta`` agrees to
1e-3 between ``dt = 0.5`` and ``0.25`` on the builtin corpus)."""

VARIANTS = ("real", "attention", "post_ln", "post_ln+ff")
"""Clouds compared by default by :func:`dynamics_study`: the real hidden states and three
dynamics (see :data:`DYNAMICS`)."""

DYNAMICS = {
    "attention": "continuous time, layer l's attention during t in [l-1, l] (RK4, step dt)",
    "attention+ff": "continuous time, attention plus the trained feed-forward term (2.8) (RK4)",
    "post_ln": "one discrete Post-LN step y <- normalize(y + attn(y)) per layer",
    "post_ln+ff": "two discrete Post-LN sublayers per layer, as the network: "
                  "y <- normalize(y + attn(y)), then y <- normalize(y + ff(y))",
}
"""The dynamics :func:`dynamics_study` can run. ``attention+ff`` is not in the defaults: the
trained feed-forward drift is large (``|ff| >> |attn|``) and RK4 is not converged at
affordable steps (the layer-6 mean inner product moves from 0.43 to 0.18 between ``dt = 0.5``
and ``0.25`` on the first builtin passage)."""


def builtin_corpus() -> list[str]:
    """The builtin passages (public domain, shipped in ``particles/data/corpus.txt``): one
    passage per paragraph, whitespace collapsed, ``#`` comment lines dropped."""
    text = resources.files("particles").joinpath("data/corpus.txt").read_text(encoding="utf-8")
    return split_passages(text)


def split_passages(text: str) -> list[str]:
    """Paragraphs of ``text`` (separated by blank lines), whitespace collapsed; lines starting
    with ``#`` are dropped. Raises ``ValueError`` when no passage is left."""
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]
    paras, cur = [], []
    for ln in lines + [""]:
        if ln.strip():
            cur.append(ln.strip())
        elif cur:
            paras.append(" ".join(" ".join(cur).split()))
            cur = []
    if not paras:
        msg = "text is empty: no passage to encode"
        raise ValueError(msg)
    return paras


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def effective_rank(y: np.ndarray) -> float:
    """Roy-Vetterli effective rank ``exp(-sum p_k log p_k)``, ``p_k = s_k / sum s`` (``s`` the
    singular values of the ``n x d`` token matrix)."""
    s = np.linalg.svd(y, compute_uv=False)
    p = s / s.sum()
    p = p[p > 0]
    return float(np.exp(-np.sum(p * np.log(p))))


def cloud_statistics(
    y: np.ndarray,
    *,
    bins: int = DEFAULTS["bins"],
    betas: Sequence[float] = DEFAULTS["betas"],
    delta: float = DEFAULTS["delta"],
) -> dict[str, Any]:
    """Statistics of one cloud of unit tokens ``y`` ``(n, d)``: ``histogram`` (density of
    ``<y_i, y_j>``, ``i < j``, on ``bins`` bins of ``[-1, 1]``), ``mean_inner_product``,
    ``fraction_above`` (pairs with ``<y_i, y_j> > 1 - delta``), ``clusters``, ``energy`` and
    ``log_energy`` (one per ``beta``; the log finite where ``E_beta`` overflows float64,
    :func:`particles.log_energy`) and ``effective_rank``."""
    pairs = [energies(Model(b), y) for b in betas]
    ip = pairwise_inner_products(y)
    hist, _ = np.histogram(np.clip(ip, -1.0, 1.0), bins=bins, range=(-1.0, 1.0), density=True)
    return {
        "histogram": hist,
        "mean_inner_product": float(ip.mean()),
        "fraction_above": float(np.mean(ip > 1.0 - delta)),
        "clusters": int(count_clusters(y, threshold=delta)),
        "energy": np.array([e for e, _ in pairs]),
        "log_energy": np.array([le for _, le in pairs]),
        "effective_rank": effective_rank(y),
    }


def _check_options(bins: int, betas: Sequence[float], delta: float) -> None:
    if int(bins) < 1:
        msg = f"bins must be >= 1, got {bins!r}"
        raise ValueError(msg)
    if len(betas) == 0 or not all(math.isfinite(b) and b >= 0 for b in betas):
        msg = f"betas must be a non-empty list of finite values >= 0, got {betas!r}"
        raise ValueError(msg)
    if not 0.0 < float(delta) <= 2.0:
        msg = f"delta must lie in (0, 2], got {delta!r}"
        raise ValueError(msg)


def _passages(passages: Sequence[str] | str | None) -> list[str]:
    if passages is None:
        return builtin_corpus()
    if isinstance(passages, str):
        passages = [passages]
    passages = list(passages)
    if not passages:
        msg = "passages is empty: give at least one text"
        raise ValueError(msg)
    return passages


def _bar(passages: list[str], desc: str, progress: bool) -> Any:
    """The passages, with a tqdm bar on stderr when ``progress`` (the command line's
    ``--progress``; off in library calls)."""
    from tqdm.auto import tqdm

    return tqdm(passages, desc=desc, unit="passage", disable=not progress, file=sys.stderr)


def _bin_coords(bins: int) -> dict[str, Any]:
    edges = np.linspace(-1.0, 1.0, bins + 1)
    return {"bin": ("bin", 0.5 * (edges[1:] + edges[:-1]),
                    {"long_name": "<y_i, y_j> (bin centre)", "units": "1"})}


def token_study(
    encoder: Any,
    passages: Sequence[str] | str | None = None,
    *,
    bins: int = DEFAULTS["bins"],
    betas: Sequence[float] = DEFAULTS["betas"],
    delta: float = DEFAULTS["delta"],
    progress: bool = False,
) -> xr.Dataset:
    """Figure 1 with a real model: hidden states and per-layer statistics of each passage.

    Args:
        encoder: a :class:`particles.trained.Encoder` (e.g. ``load_minilm()``).
        passages: texts (default: :func:`builtin_corpus`).
        bins, betas, delta: see :func:`cloud_statistics`.
        progress: show a progress bar over the passages (stderr).

    Returns:
        Dataset with ``hidden_states`` (passage, layer, token, dim; float32, NaN past a
        passage's ``n_tokens``), ``tokens`` (passage, token), ``histogram`` (passage, layer,
        bin), ``mean_inner_product``, ``fraction_above``, ``clusters``, ``effective_rank``,
        ``norm`` (mean token norm before normalisation) (passage, layer) and ``energy``
        (passage, layer, beta); ``attrs`` say how it was made (:func:`_attrs`).
    """
    wall0 = time.perf_counter()
    _check_options(bins, betas, delta)
    passages = _passages(passages)
    states = [encoder.hidden_states(p) for p in _bar(passages, "tokens", progress)]
    L1, d = states[0].shape[0], states[0].shape[-1]
    P, T = len(passages), max(s.shape[1] for s in states)
    hs = np.full((P, L1, T, d), np.nan, dtype=np.float32)
    toks = np.full((P, T), "", dtype=object)
    stats: dict[str, list] = {k: [] for k in ("histogram", "mean_inner_product", "fraction_above",
                                              "clusters", "energy", "log_energy", "effective_rank",
                                              "norm")}
    for p, (text, s) in enumerate(zip(passages, states)):
        n = s.shape[1]
        hs[p, :, :n] = s
        toks[p, :n] = encoder.tokens(text)
        per = [cloud_statistics(_unit(s[ell]), bins=bins, betas=betas, delta=delta)
               for ell in range(L1)]
        for k in stats:
            if k == "norm":
                stats[k].append(np.linalg.norm(s, axis=-1).mean(axis=-1))
            else:
                stats[k].append(np.array([q[k] for q in per]))
    lay = ("passage", "layer")
    ds = xr.Dataset(
        {
            "hidden_states": (lay + ("token", "dim"), hs, note_nonfinite({
                "long_name": "hidden states (layer 0: embedding output)", "units": "1"}, hs,
                "NaN past a passage's n_tokens (padding to the longest passage)")),
            "tokens": (("passage", "token"), toks.astype(str), {"long_name": "word pieces"}),
            "n_tokens": ("passage", np.array([s.shape[1] for s in states]),
                         {"long_name": "tokens in the passage, special tokens included"}),
            "text": ("passage", np.array(passages, dtype=str)),
            "histogram": (lay + ("bin",), np.stack(stats["histogram"]), {
                "long_name": "density of <y_i, y_j>, i < j", "units": "1"}),
            "mean_inner_product": (lay, np.stack(stats["mean_inner_product"]),
                                   {"long_name": "mean <y_i, y_j>, i < j", "units": "1"}),
            "fraction_above": (lay, np.stack(stats["fraction_above"]), {
                "long_name": f"fraction of pairs with <y_i, y_j> > {1 - delta:g}", "units": "1"}),
            "clusters": (lay, np.stack(stats["clusters"]), {
                "long_name": f"clusters (components of <y_i, y_j> >= {1 - delta:g})"}),
            **energy_variables(lay + ("beta",), np.stack(stats["energy"]),
                               np.stack(stats["log_energy"]), {
                "long_name": "E_beta (docs/equations.md section 2, -1 inside the sum)"}),
            "effective_rank": (lay, np.stack(stats["effective_rank"]),
                               {"long_name": "effective rank (Roy-Vetterli)"}),
            "norm": (lay, np.stack(stats["norm"]), {"long_name": "mean |x_i| before normalisation"}),
        },
        coords={
            "passage": np.arange(P),
            "layer": ("layer", np.arange(L1), {"long_name": "layer (0: embedding output)"}),
            "token": np.arange(T),
            "dim": np.arange(d),
            "beta": ("beta", np.asarray(betas, dtype=float)),
            **_bin_coords(bins),
        },
    )
    ds.attrs.update(_attrs("token_study", encoder, L1 - 1, {
        "bins": int(bins), "betas": [float(b) for b in betas], "delta": float(delta),
        "normalisation": "y_i = x_i / |x_i| (unit sphere), special tokens included"}, wall0))
    return ds


def _attrs(study: str, encoder: Any, layers: int, settings: dict[str, Any], wall0: float, *,
           dynamics: dict[str, Any] | None = None, scheme: str = "", dt: float | None = None
           ) -> dict[str, Any]:
    """The ``attrs`` of a study, from the result schema (:func:`meanfield.integrate.result_attrs`):
    ``model`` the JSON ``{"encoder": name}`` (with the ``dynamics`` run, where there are),
    ``t_reached`` the last layer (one layer = one unit of time), no step counters (0), no
    tolerances; ``scheme`` and ``dt`` those of the dynamics (fixed steps), where there are."""
    name = getattr(encoder, "name", "encoder")
    model = {"encoder": name} if dynamics is None else {"encoder": name, "dynamics": dynamics}
    return result_attrs(
        title=f"{study} of {name} (validation.tokens)", solver=f"validation.tokens.{study}",
        model=json.dumps(model), settings=settings, scheme=scheme,
        controller="ConstantStep" if scheme else "", rtol=None, atol=None, dt=dt, stats={},
        stop_reason=StopReason.SUCCESS.value, successful=True, t_reached=float(layers),
        wall_time_s=time.perf_counter() - wall0)


def _encoder_name(ds: xr.Dataset) -> str:
    """The encoder a study's Dataset was made with: ``model``'s ``encoder`` (a file written
    before the result schema held the bare name in ``model``)."""
    raw = str(ds.attrs.get("model", ""))
    try:
        model = json.loads(raw)
    except ValueError:
        return raw
    return str(model.get("encoder", "")) if isinstance(model, dict) else raw


def _toy_cloud(y0: np.ndarray, beta: float, dt: float) -> np.ndarray:
    """The toy model ``Q = K = V = I`` (SA (2.3)) after one unit of time from ``y0``."""
    ds = simulate(Model(beta), y0, [0.0, 1.0], method="rk4", dt=dt, observables=False)
    return ds["x"].values[-1]


def fit_toy_beta(
    y_in: np.ndarray,
    y_out: np.ndarray,
    *,
    dt: float = DEFAULTS["dt"],
    bounds: tuple[float, float] = DEFAULTS["beta_bounds"],
) -> tuple[float, float]:
    """The ``beta`` of the toy model (SA, ``Q = K = V = I``) whose one unit of time maps the
    cloud ``y_in`` to the inner-product distribution closest to ``y_out``'s (W1 between the
    ``<y_i, y_j>`` samples), by bounded scalar minimisation (Brent, ``xatol = 0.1``);
    returns ``(beta, W1)``. For large ``beta`` each token attends mostly to itself and moves
    little, so a layer that barely moves (or spreads) the tokens fits a large ``beta``."""
    y_in = _unit(np.asarray(y_in, dtype=float))
    target = pairwise_inner_products(_unit(np.asarray(y_out, dtype=float)))
    if y_in.shape[0] < y_in.shape[1]:
        # Q = K = V = I is rotation invariant and its velocity lies in the span of the tokens:
        # integrate the coordinates in an orthonormal basis of that span (n <= d dimensions)
        basis, _ = np.linalg.qr(y_in.T)
        y_in = _unit(y_in @ basis)

    def cost(beta: float) -> float:
        return wasserstein_distance(pairwise_inner_products(_toy_cloud(y_in, beta, dt)), target)

    res = minimize_scalar(cost, bounds=bounds, method="bounded", options={"xatol": 0.1})
    return float(res.x), float(res.fun)


def _advance(f: Any, y: np.ndarray, scheme: str, dt: float) -> np.ndarray:
    """The state after one unit of time of ``x' = f(x)`` on the sphere: the project's
    integration engine, ``scheme`` with equal steps ``<= dt`` and renormalisation."""
    last: list[np.ndarray] = []
    sol = integrate(RungeKutta(f, scheme, project=normalize_rows), y, np.array([0.0, 1.0]),
                    controller=ConstantStep(dt), output=lambda k, t, x, c: last.append(x))
    if not sol.successful:
        msg = f"the token dynamics stopped: {sol.message}"
        raise RuntimeError(msg)
    return last[-1]


def _run_dynamics(encoder: Any, y0: np.ndarray, radii: np.ndarray, variant: str,
                  dt: float) -> np.ndarray:
    """Clouds after each layer (``(layers + 1, n, d)``) of one dynamics variant.

    The continuous variants and ``post_ln`` run the layers as one schedule of models
    (:class:`meanfield.Schedule`: layer ``l``'s sphere model during ``[l - 1, l]``) through
    ``particles.simulate``, which stops at each layer's end; ``post_ln+ff`` (two sublayers
    per layer, attention then feed-forward) is stepped here layer by layer."""
    if variant != "post_ln+ff":
        schedule = Schedule([(float(ell), encoder.layer_model(
            ell, feedforward=variant == "attention+ff", radius=float(radii[ell])))
            for ell in range(encoder.num_layers)])
        post_ln = variant == "post_ln"  # one step y <- normalize(y + attn(y)) per layer
        ds = simulate(schedule, y0, np.arange(encoder.num_layers + 1.0),
                      method="post_ln" if post_ln else "rk4", dt=1.0 if post_ln else dt,
                      observables=False)
        return np.asarray(ds["x"].values)
    out = [y0]
    y = y0
    for ell, lw in enumerate(encoder.layers):
        r = float(radii[ell])
        r1 = encoder.ff_radius(ell)

        def attn(x: np.ndarray, lw: Any = lw, r: float = r) -> np.ndarray:
            return lw.sphere_drift(x, r)

        def ff(x: np.ndarray, lw: Any = lw, r1: float = r1) -> np.ndarray:
            return lw.feedforward(r1 * x, outer_bias=False) / r1

        if variant.startswith("post_ln"):  # one Post-LN layer: x <- normalize(x + attn(x))
            y = _advance(attn, y, "euler", 1.0)
            if variant == "post_ln+ff":
                y = _advance(ff, y, "euler", 1.0)
        else:
            f = attn if variant == "attention" else (lambda x, a=attn, g=ff: a(x) + g(x))
            y = _advance(lambda x, f=f: project_tangent(x, f(x)), y, "rk4", dt)
        out.append(y)
    return np.stack(out)


def dynamics_study(
    encoder: Any,
    passages: Sequence[str] | str | None = None,
    *,
    bins: int = DEFAULTS["bins"],
    delta: float = DEFAULTS["delta"],
    dt: float = DEFAULTS["dt"],
    kernel_beta: float = DEFAULTS["kernel_beta"],
    fit_beta: bool = True,
    variants: Sequence[str] = VARIANTS[1:],
    progress: bool = False,
) -> xr.Dataset:
    """Real tokens against the dynamics driven by the model's own weights, layer by layer.

    Each passage starts from its real layer-0 cloud ``y(0)`` (unit tokens); during
    ``t in [l - 1, l]`` the tokens follow layer ``l``'s sphere model
    (:meth:`particles.trained.Encoder.layer_model`, radius ``r_l`` = the measured mean norm of
    the real layer-``l`` input, the one number taken from the real run besides ``y(0)``).

    Args:
        encoder: a :class:`particles.trained.Encoder`.
        passages: texts (default: :func:`builtin_corpus`).
        bins, delta: as in :func:`cloud_statistics`.
        dt: RK4 step of the continuous variants (one layer = one unit of time).
        kernel_beta: ``beta`` of the kernel distance between clouds.
        fit_beta: also fit the toy model's ``beta`` per layer (:func:`fit_toy_beta`).
        variants: dynamics to run, names of :data:`DYNAMICS`.
        progress: show a progress bar over the passages (stderr).

    Returns:
        Dataset over (variant, passage, layer): ``histogram`` (+ bin), ``mean_inner_product``,
        ``fraction_above``, ``clusters``, ``effective_rank``, ``w1`` (W1 between the
        ``<y_i, y_j>`` distributions of the variant and the real layer), ``kernel_distance``
        (between the clouds), ``explained`` (``(m - m_0) / (m_real - m_0)`` for the mean inner
        product ``m``); and over (passage, layer): ``toy_beta``, ``toy_w1``; ``attrs`` say how
        it was made (:func:`_attrs`; the dynamics of each variant in ``model``).
    """
    wall0 = time.perf_counter()
    _check_options(bins, (1.0,), delta)
    if not (math.isfinite(dt) and 0 < dt <= 1):
        msg = f"dt must lie in (0, 1], got {dt!r}"
        raise ValueError(msg)
    bad = [v for v in variants if v not in DYNAMICS]
    if bad or not variants:
        msg = f"variants must be a non-empty list of {tuple(DYNAMICS)}, got {list(variants)!r}"
        raise ValueError(msg)
    names = ("real", *variants)
    passages = _passages(passages)
    L = encoder.num_layers
    V, P = len(names), len(passages)
    shape = (V, P, L + 1)
    arrays = {k: np.full(shape, np.nan) for k in
              ("mean_inner_product", "fraction_above", "clusters", "effective_rank", "w1",
               "kernel_distance", "explained")}
    hist = np.full(shape + (bins,), np.nan)
    toy_beta = np.full((P, L + 1), np.nan)
    toy_w1 = np.full((P, L + 1), np.nan)
    for p, text in enumerate(_bar(passages, "dynamics", progress)):
        states = encoder.hidden_states(text)
        real = _unit(states)
        radii = np.linalg.norm(states[:-1], axis=-1).mean(axis=-1)
        clouds = {"real": real}
        for v in variants:
            clouds[v] = _run_dynamics(encoder, real[0], radii, v, dt)
        m0 = float(pairwise_inner_products(real[0]).mean())
        for iv, v in enumerate(names):
            for ell in range(L + 1):
                y = clouds[v][ell]
                st = cloud_statistics(y, bins=bins, betas=(1.0,), delta=delta)
                hist[iv, p, ell] = st["histogram"]
                for k in ("mean_inner_product", "fraction_above", "clusters", "effective_rank"):
                    arrays[k][iv, p, ell] = st[k]
                arrays["w1"][iv, p, ell] = wasserstein_distance(
                    pairwise_inner_products(y), pairwise_inner_products(real[ell]))
                arrays["kernel_distance"][iv, p, ell] = kernel_distance_particle_sets(
                    y, real[ell], kernel_beta)
        mreal = arrays["mean_inner_product"][0, p]
        with np.errstate(divide="ignore", invalid="ignore"):
            arrays["explained"][:, p, 1:] = (arrays["mean_inner_product"][:, p, 1:] - m0) / (
                mreal[1:] - m0)
        if fit_beta:
            for ell in range(1, L + 1):
                toy_beta[p, ell], toy_w1[p, ell] = fit_toy_beta(
                    real[ell - 1], real[ell], dt=DEFAULTS["fit_dt"])
    dims = ("variant", "passage", "layer")
    long = {
        "mean_inner_product": "mean <y_i, y_j>, i < j",
        "fraction_above": f"fraction of pairs with <y_i, y_j> > {1 - delta:g}",
        "clusters": f"clusters (components of <y_i, y_j> >= {1 - delta:g})",
        "effective_rank": "effective rank (Roy-Vetterli)",
        "w1": "W1 between the <y_i, y_j> distributions of the variant and the real layer",
        "kernel_distance": f"kernel distance (beta = {kernel_beta:g}) to the real cloud",
        "explained": "(m - m_0) / (m_real - m_0), m the mean inner product",
    }
    data: dict[str, Any] = {k: (dims, a, {"long_name": long[k], "units": "1"})
                            for k, a in arrays.items()}
    data["explained"] = (dims, arrays["explained"], note_nonfinite(
        data["explained"][2], arrays["explained"],
        "NaN at layer 0 (nothing to explain yet), +-inf or NaN where m_real = m_0"))
    data["histogram"] = (dims + ("bin",), hist, {"long_name": "density of <y_i, y_j>, i < j"})
    no_fit = ("NaN at layer 0 (no earlier layer)" if fit_beta
              else "NaN: not fitted (fit_beta=False)")
    data["toy_beta"] = (("passage", "layer"), toy_beta, note_nonfinite({
        "long_name": "beta of the toy model Q = K = V = I fitted to layer l from the real "
                     "layer l - 1 (one unit of time, W1 of the <y_i, y_j> distributions)"},
        toy_beta, no_fit))
    data["toy_w1"] = (("passage", "layer"), toy_w1, note_nonfinite(
        {"long_name": "W1 left at the fitted beta"}, toy_w1, no_fit))
    data["text"] = ("passage", np.array(passages, dtype=str))
    ds = xr.Dataset(
        data,
        coords={"variant": list(names), "passage": np.arange(P),
                "layer": ("layer", np.arange(L + 1), {"long_name": "layer (0: embedding output)"}),
                **_bin_coords(bins)},
    )
    continuous = any(not v.startswith("post_ln") for v in variants)  # RK4 steps dt, else Euler 1
    ds.attrs.update(_attrs("dynamics_study", encoder, L, {
        "bins": int(bins), "delta": float(delta), "dt": float(dt),
        "kernel_beta": float(kernel_beta), "fit_beta": bool(fit_beta),
        "fit_dt": DEFAULTS["fit_dt"], "beta_bounds": list(DEFAULTS["beta_bounds"])}, wall0,
        dynamics={
            "layer model": "layer l's trained multi-head attention on the unit sphere (biases "
                           "dropped, beta = 1/sqrt(d_head), Q_h = r_l W_q^h, K_h = r_l W_k^h, "
                           "V_h = W_o^h W_v^h, r_l the mean norm of the real layer-l input)",
            **{v: DYNAMICS[v] for v in variants}},
        scheme="rk4" if continuous else "euler", dt=float(dt) if continuous else 1.0))
    return ds


def _mean_std(a: xr.DataArray) -> tuple[np.ndarray, np.ndarray]:
    return a.mean("passage").values, a.std("passage", ddof=1 if a.sizes["passage"] > 1 else 0).values


def _table(columns: list[tuple[str, xr.DataArray]], layers: int) -> str:
    head = "| layer | " + " | ".join(c for c, _ in columns) + " |"
    rows = [head, "|" + "---|" * (len(columns) + 1)]
    stats = [_mean_std(a) for _, a in columns]
    for ell in range(layers):
        cells = ["-" if not np.isfinite(m[ell]) else f"{m[ell]:.3g} ± {s[ell]:.2g}"
                 for m, s in stats]
        rows.append(f"| {ell} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def summary_table(tokens: xr.Dataset) -> str:
    """Markdown table of the real per-layer statistics, mean ± standard deviation over
    passages."""
    cols = [("mean <y_i,y_j>", tokens.mean_inner_product),
            ("frac > 0.9", tokens.fraction_above), ("clusters", tokens.clusters),
            ("eff. rank", tokens.effective_rank)]
    cols += [(f"E_beta, beta={float(b):g}", tokens.energy.sel(beta=b)) for b in tokens.beta.values]
    cols += [("mean norm", tokens.norm)]
    return _table(cols, tokens.sizes["layer"])


def dynamics_table(dynamics: xr.Dataset) -> str:
    """Markdown table: per layer, the mean inner product of the real layer and of each
    dynamics, the W1 of each to the real layer, the share of the real clustering the
    attention-only dynamics explains, and the fitted toy ``beta`` (mean ± std over passages)."""
    dyn = [str(v) for v in dynamics.variant.values if v != "real"]
    cols = [(f"mean <y,y> {v}", dynamics.mean_inner_product.sel(variant=v))
            for v in ("real", *dyn)]
    cols += [(f"W1 {v}", dynamics.w1.sel(variant=v)) for v in dyn]
    if "attention" in dyn:
        cols += [("explained (attention)", dynamics.explained.sel(variant="attention"))]
    cols += [("toy beta", dynamics.toy_beta), ("toy W1", dynamics.toy_w1)]
    return _table(cols, dynamics.sizes["layer"])


def _inner_product_axis(ax: Any) -> None:
    ax.set_xlim(-1, 1)
    ax.set_xticks([-1, -0.5, 0, 0.5, 1], ["-1", "", "0", "", "1"])


def plot_figure1(tokens: xr.Dataset, passage: int = 0) -> Any:
    """Figure 1's layout: one histogram of ``<y_i, y_j>`` per layer, for one passage (bars) and
    the mean over passages (line)."""
    import matplotlib.pyplot as plt

    L1 = tokens.sizes["layer"]
    fig, axes = plt.subplots(1, L1, figsize=(2.2 * L1, 2.6), sharey=True)
    centres = tokens.bin.values
    width = centres[1] - centres[0]
    for ell, ax in enumerate(np.atleast_1d(axes)):
        ax.bar(centres, tokens.histogram.isel(passage=passage, layer=ell).values, width=width,
               color="tab:blue", alpha=0.7, label=f"passage {passage}")
        ax.plot(centres, tokens.histogram.isel(layer=ell).mean("passage").values, color="k",
                lw=1, label="mean over passages")
        ax.set_title(f"layer {ell}" if ell else "embeddings")
        ax.set_xlabel(r"$\langle y_i, y_j\rangle$")
        _inner_product_axis(ax)
    np.atleast_1d(axes)[0].set_ylabel("density")
    np.atleast_1d(axes)[-1].legend(fontsize=7, loc="upper left")
    fig.suptitle(f"{_encoder_name(tokens)}: pairwise inner products of the normalised "
                 "tokens, layer by layer", fontsize=10)
    fig.tight_layout()
    return fig


def plot_summary(tokens: xr.Dataset) -> Any:
    """Per-layer statistics across layers, mean +- standard deviation over passages."""
    import matplotlib.pyplot as plt

    layer = tokens.layer.values
    panels = [("mean_inner_product", "mean inner product"), ("fraction_above", "fraction > 0.9"),
              ("clusters", "clusters"), ("effective_rank", "effective rank")]
    fig, axes = plt.subplots(1, 5, figsize=(16, 3.2))
    for ax, (name, label) in zip(axes, panels):
        m, s = _mean_std(tokens[name])
        ax.errorbar(layer, m, yerr=s, marker="o", capsize=3)
        ax.set_title(label)
        ax.set_xlabel("layer")
        ax.set_ylabel(label)
    for ib, b in enumerate(tokens.beta.values):
        m, s = _mean_std(tokens.energy.isel(beta=ib))
        axes[-1].errorbar(layer, m, yerr=s, marker="o", capsize=3, label=f"beta = {b:g}")
    axes[-1].set_yscale("log")
    axes[-1].set_title(r"energy $E_\beta$")
    axes[-1].set_xlabel("layer")
    axes[-1].set_ylabel(r"$E_\beta$")
    axes[-1].legend(fontsize=7)
    fig.suptitle(f"{_encoder_name(tokens)}: {tokens.sizes['passage']} passages "
                 "(mean ± std)", fontsize=10)
    fig.tight_layout()
    return fig


def plot_dynamics(dynamics: xr.Dataset, passage: int = 0) -> Any:
    """Top: per layer, the ``<y_i, y_j>`` histograms of the real layer and of the dynamics
    (one passage). Bottom: mean inner product, W1 to the real layer and the fitted toy
    ``beta`` across layers (mean +- standard deviation over passages)."""
    import matplotlib.pyplot as plt

    L1 = dynamics.sizes["layer"]
    fig = plt.figure(figsize=(2.3 * L1, 6.0))
    gs = fig.add_gridspec(2, L1 * 2)
    centres = dynamics.bin.values
    colors = {"real": "k", "attention": "tab:blue", "attention+ff": "tab:red",
              "post_ln": "tab:green", "post_ln+ff": "tab:orange"}
    first = None
    for ell in range(L1):
        ax = fig.add_subplot(gs[0, 2 * ell: 2 * ell + 2], sharey=first)
        first = first or ax
        for v in dynamics.variant.values:
            ax.plot(centres, dynamics.histogram.sel(variant=v).isel(passage=passage, layer=ell),
                    color=colors.get(str(v)), lw=1.5 if v == "real" else 1, label=str(v))
        ax.set_title(f"layer {ell}" if ell else "embeddings")
        _inner_product_axis(ax)
        ax.set_xlabel(r"$\langle y_i, y_j\rangle$")
        ax.set_ylabel("density" if ell == 0 else "")
        if ell == 0:
            ax.legend(fontsize=7)
    layer = dynamics.layer.values
    panels = [("mean_inner_product", "mean inner product"), ("w1", "W1 to the real layer")]
    third = (2 * L1) // 3
    for k, (name, label) in enumerate(panels):
        ax = fig.add_subplot(gs[1, k * third:(k + 1) * third])
        for v in dynamics.variant.values:
            if name == "w1" and v == "real":
                continue
            m, s = _mean_std(dynamics[name].sel(variant=v))
            ax.errorbar(layer, m, yerr=s, marker="o", capsize=3, color=colors.get(str(v)),
                        label=str(v))
        ax.set_title(label)  # the variants' colours: the legend of the first panel
        ax.set_xlabel("layer")
        ax.set_ylabel(label)
    ax = fig.add_subplot(gs[1, 2 * third:])
    m, s = _mean_std(dynamics.toy_beta)
    ax.errorbar(layer, m, yerr=s, marker="o", capsize=3, color="tab:purple")
    ax.axhline(DEFAULTS["beta_bounds"][1], color="gray", ls="--", lw=0.8,
               label="search bound")
    ax.legend(fontsize=7)
    ax.set_title(r"toy model $Q=K=V=I$")
    ax.set_xlabel("layer")
    ax.set_ylabel(r"fitted $\beta$")
    fig.suptitle(f"{_encoder_name(dynamics)}: real tokens against the dynamics with "
                 "the model's own attention", fontsize=10)
    fig.tight_layout()
    return fig


__all__ = [
    "DEFAULTS",
    "DYNAMICS",
    "VARIANTS",
    "builtin_corpus",
    "cloud_statistics",
    "dynamics_study",
    "dynamics_table",
    "effective_rank",
    "fit_toy_beta",
    "plot_dynamics",
    "plot_figure1",
    "plot_summary",
    "split_passages",
    "summary_table",
    "token_study",
]
