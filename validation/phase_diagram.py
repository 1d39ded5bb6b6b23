r"""The phase diagram of clustering (Figures 3 and 5 of the paper; docs/equations.md sections 4-5).

.. autosummary::
   phase_diagram
   gamma
   transition_time
   wilson_interval
   first_crossing
   sample_tokens
   sample_matrices

For every ``(beta, t)`` the probability, over i.i.d. uniform starts on ``S^{d-1}``, that
``<x_1(t), x_2(t)> >= 1 - delta`` (with a binomial confidence interval), also averaged over
all pairs ``i != j``; and the curve ``Gamma_{inf,delta}`` of (6.12), where the solution
``gamma_beta`` of (6.9) (SA) or (6.10) (USA) reaches ``1 - delta``.

The particle system of docs/equations.md section 2 is integrated by
:func:`particles.ensemble.simulate_ensemble` (the project's one integration engine, RK4 with
projection and cubic Hermite output, vectorised over realisations). Two reductions make it
fast, both exact:

* **Rotation invariance** (``Q = K = V = I``): ``x_i' = Σ_j A_ij(G) (x_j - G_ij x_i)`` with
  ``G = X Xᵀ``, so ``G' = (A - D) G + G (A - D)ᵀ``, ``D = diag(Σ_j A_ij G_ij)``, is a closed
  equation for the Gram matrix: the law of the inner products depends on ``d`` only through
  the law of ``G(0)``. For ``d > n`` the tokens are therefore integrated in ``R^n``, started
  from the rows of the Bartlett factor ``L`` of a Wishart matrix (``Z = L Qᵀ`` for Gaussian
  ``Z`` of size ``n x d``: ``L_ii² ~ χ²_{d-i}``, ``L_ij ~ N(0, 1)`` below the diagonal,
  rows normalised): ``d = 1024`` costs what ``d = 32`` costs.
* **Freezing of clustered realisations** (:class:`particles.ensemble.FreezeClustered`): a
  realisation whose inner products are all ``>= 1 - delta`` stays so, and is no longer
  integrated.

Every cell runs on the array backend chosen by ``backend``, ``device`` and ``dtype``
(:mod:`meanfield.backend`: NumPy, or PyTorch on the CPU or a GPU, float64 or float32); the
random starts are drawn by NumPy whatever the backend, so two backends see the same starts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike
from scipy.integrate import solve_ivp
from scipy.stats import norm

from meanfield import Model, Schedule, theory
from meanfield import attention as attention_registry
from meanfield import backend as bk
from meanfield.finite import note_nonfinite, note_variables
from meanfield.integrate import Interrupted, check_step_count, finish, revise_attrs
from meanfield.special import check_exp_beta
from particles.ensemble import EnsembleError, simulate_ensemble
from validation.sweep import SweepError, sweep

QK_ENSEMBLES = ("identity", "ginibre", "goe")
"""Laws of the bilinear form ``B = Qᵀ K``: identity; ``Q, K`` independent real Ginibre
(entries ``N(0, 1/d)``); ``Q = I`` and ``K`` in the GOE (``(G + Gᵀ)/√(2d)``)."""

V_ENSEMBLES = ("identity", "ginibre", "goe", "qk")
"""Laws of ``V``: identity, real Ginibre, GOE (normalised as above), or ``V = Qᵀ K``."""

attention_registry.register_solver(
    "phase_diagram", "validation.phase_diagram, with the gamma-ODE (6.9)/(6.10)", section=5)

ATTENTIONS = attention_registry.names(solver="phase_diagram")
"""Attention kinds with a gamma-ODE ((6.9) SA, (6.10) USA): those of
:mod:`meanfield.attention` that declare the ``"phase_diagram"`` solver."""

CHUNK = 256
"""Most realisations integrated together on the CPU: 256 keeps the ``n x n`` weights (2 MiB
at n = 32) in cache; measured 1.3x faster than 1024 at once on one core (more with two
workers sharing the L3 cache), while larger than this the per-call overhead of NumPy stays
small."""

CHUNK_STATE_BYTES = 2**19
"""The most bytes of state (``chunk x n x m`` numbers, ``m`` the dimension integrated)
integrated together on the CPU. The Runge-Kutta stages, the ``n x n`` weights and the
temporaries are a few times the state, so 512 KiB keeps a chunk's working set in a core's
share of the L3 cache. Measured on Figure 3 at d = 128, whose identity-matrix cells
integrate the exact 32-dimensional reduction (:func:`sample_tokens`), so 8 KiB a
realisation: 64 at once (512 KiB) ran a cell 1.4-1.6x faster than 256 (2 MiB), 32 and 128
about as fast as 64 (docs/sweeps.md); at d = 2 the cap :data:`CHUNK` applies."""


# -- the curve (6.12) -------------------------------------------------------------------


def gamma(beta: float | Schedule, n: int, times: ArrayLike,
          attention: str = "softmax") -> np.ndarray:
    """``gamma_beta(t)`` of Theorem 6.8 (:func:`meanfield.theory.gamma`), attention checked.

    ``beta`` may be a :class:`meanfield.Schedule` of models starting at ``t <= 0`` (their
    ``beta`` read, piece by piece): the orthogonal start stays symmetric under any
    piecewise-constant ``beta``, so its common inner product solves (6.9)/(6.10) with the
    current piece's ``beta``, one ``solve_ivp`` a piece (pieces of equal ``beta`` joined:
    one piece is :func:`meanfield.theory.gamma` itself)."""
    attention = _check_attention(attention)
    t = np.asarray(times, dtype=float)
    segments = _beta_segments(beta, float(t.max()) if t.size else 0.0)
    if len(segments) == 1:
        return theory.gamma(segments[0][2], n, t, attention)
    out = np.zeros_like(t)
    g0 = 0.0
    for a, b, beta_k in segments:
        sol = solve_ivp(theory.gamma_rhs(beta_k, int(n), attention), (a, b), [g0],
                        method="DOP853", dense_output=True, rtol=1e-11, atol=1e-14)
        inside = (t >= a) & (t <= b)
        if inside.any():
            out[inside] = sol.sol(t[inside])[0]
        g0 = float(sol.y[0, -1])
    return np.clip(out, 0.0, 1.0)


def transition_time(beta: float | Schedule, n: int, delta: float, attention: str = "softmax",
                    t_max: float = 1e6) -> float:
    """The curve (6.12) at ``beta`` (:func:`meanfield.theory.transition_time`), checked;
    under a :class:`meanfield.Schedule` (as :func:`gamma`), the first time ``gamma`` reaches
    ``1 - delta``, piece by piece (the last piece to ``t_max``)."""
    attention = _check_attention(attention)
    _check_delta(delta)
    segments = _beta_segments(beta, t_max)
    if len(segments) == 1:
        return theory.transition_time(segments[0][2], n, delta, attention, t_max)

    def hit(t: float, g: np.ndarray) -> float:
        return g[0] - (1.0 - delta)

    hit.terminal = True  # type: ignore[attr-defined]
    g0 = 0.0
    for a, b, beta_k in segments:
        sol = solve_ivp(theory.gamma_rhs(beta_k, int(n), attention), (a, b), [g0],
                        method="DOP853", events=hit, rtol=1e-11, atol=1e-14)
        if sol.t_events[0].size:
            return float(sol.t_events[0][0])
        g0 = float(sol.y[0, -1])
    return math.inf


def _beta_segments(beta: float | Schedule, t_end: float) -> list[tuple[float, float, float]]:
    """``(start, end, beta)`` from ``t = 0`` to ``t_end``, adjacent pieces of equal ``beta``
    joined; one segment for a number."""
    if not isinstance(beta, Schedule):
        return [(0.0, t_end, float(beta))]
    if beta.starts[0] > 0:
        msg = f"schedule: the first piece must start at t <= 0, got {beta.starts[0]!r}"
        raise ValueError(msg)
    edges = [0.0, *(s for s in beta.starts if 0 < s < t_end), t_end]
    out: list[tuple[float, float, float]] = []
    for a, b in zip(edges, edges[1:]):
        beta_k = beta.model_at(a).beta
        if out and out[-1][2] == beta_k:
            out[-1] = (out[-1][0], b, beta_k)
        else:
            out.append((a, b, beta_k))
    return out or [(0.0, t_end, beta.model_at(0.0).beta)]


# -- schedules in the ensembles -----------------------------------------------------------


def check_schedule(schedule: Any, attention: str, qk: Any = "identity",
                   v: Any = "identity") -> None:
    """Refuse (``ValueError`` naming the piece, the field and its value) a ``schedule`` the
    diagrams cannot run: a :class:`meanfield.Schedule` starting at ``t <= 0`` whose pieces
    are SA or USA models of the run's ``attention``, noiseless, with no matrices of their own
    (the matrices come from the laws ``qk``, ``v``), no heads, causal mask or feed-forward
    term; ``qk``/``v`` a law or a list with one per piece."""
    if not isinstance(schedule, Schedule):
        msg = f"schedule must be a meanfield.Schedule, got {type(schedule).__name__}"
        raise ValueError(msg)
    if schedule.starts[0] > 0:
        msg = f"schedule: the first piece must start at t <= 0, got {schedule.starts[0]!r}"
        raise ValueError(msg)
    for k, m in enumerate(schedule.models):
        if m.attention != attention:
            msg = (f"schedule piece {k}: attention={m.attention!r}, the run's is {attention!r} "
                   "(one attention: it sets the step and the curve (6.12))")
            raise ValueError(msg)
        for name in ("Q", "K", "V", "heads", "feedforward"):
            if getattr(m, name) is not None:
                msg = (f"schedule piece {k}: model.{name} is set; the ensembles draw their "
                       "matrices per realisation from the laws qk and v (a list gives one "
                       "law a piece)")
                raise ValueError(msg)
        for name, ok in (("value", m.value == 1), ("noise", m.noise == 0),
                         ("causal", not m.causal)):
            if not ok:
                msg = (f"schedule piece {k}: model.{name} = {getattr(m, name)!r}; the "
                       "ensembles integrate the attractive, noiseless, non-causal (SA)/(USA)")
                raise ValueError(msg)
    _laws(qk, v, schedule)


def _laws(qk: Any, v: Any, schedule: Schedule | None) -> list[tuple[str, str]]:
    """The matrix laws: one ``(qk, v)`` drawn once and shared by every piece, or (a list
    for ``qk`` or ``v``) one per piece of ``schedule``, each piece drawing its own."""
    if not isinstance(qk, (list, tuple)) and not isinstance(v, (list, tuple)):
        return [(qk, v)]
    if schedule is None:
        msg = f"qk and v: a list of laws needs a schedule (one law a piece), got {qk!r}, {v!r}"
        raise ValueError(msg)
    out = []
    for name, law in (("qk", qk), ("v", v)):
        if isinstance(law, (list, tuple)) and len(law) != len(schedule):
            msg = (f"{name}: a list gives one law per piece of the schedule ({len(schedule)} "
                   f"pieces), got {len(law)}")
            raise ValueError(msg)
    for k in range(len(schedule)):
        out.append((qk[k] if isinstance(qk, (list, tuple)) else qk,
                    v[k] if isinstance(v, (list, tuple)) else v))
    return out


def schedule_at(schedule: Schedule, beta: float) -> Schedule:
    """The schedule a cell at ``beta`` runs: piece ``k`` at ``beta * model_k.beta`` (the
    schedule's ``beta`` are factors of the diagram's ``beta`` axis, so a schedule of one
    piece with ``beta = 1`` is the plain diagram)."""
    return Schedule([(s, Model(beta=float(beta) * m.beta, attention=m.attention))
                     for s, m in schedule])


def _cell_run(beta: float, schedule: Schedule | None, dt: float,
              attention: str) -> tuple[float | Schedule, float | list[float]]:
    """What :func:`particles.ensemble.simulate_ensemble` takes for a cell at ``beta``: the
    ``beta`` (or the cell's schedule) and the step (:func:`usa_step`: one a piece)."""
    if schedule is None:
        return beta, usa_step(dt, beta, attention)
    check_schedule(schedule, _check_attention(attention))  # nothing of a piece dropped
    run = schedule_at(schedule, beta)
    return run, [usa_step(dt, m.beta, attention) for m in run.models]


def _draws(rng: np.random.Generator, realizations: int, d: int,
           laws: list[tuple[str, str]]) -> tuple[Any, Any]:
    """The matrices of :func:`sample_matrices` for each law (in order, after the starts): one
    pair shared by every piece, or lists with one a piece."""
    drawn = [sample_matrices(rng, realizations, d, q, w) for q, w in laws]
    if len(drawn) == 1:
        return drawn[0]
    return [b for b, _ in drawn], [w for _, w in drawn]


def _part(a: Any, part: slice) -> Any:
    """The realisations ``part`` of a matrix, or of each matrix of a list (``None`` kept)."""
    if isinstance(a, list):
        return [_part(b, part) for b in a]
    return None if a is None else a[part]


def model_record(attention: str, schedule: Schedule | None, **extra: Any) -> dict[str, Any]:
    """The ``model`` attribute of a diagram (the result schema): the attention, ``beta``
    swept, and under a schedule every piece's start and state with how its ``beta`` is
    read (the JSON of :meth:`meanfield.Schedule.state`)."""
    out: dict[str, Any] = {"attention": attention, "beta": "swept", **extra}
    if schedule is not None:
        out.update(schedule.state(), schedule_beta="piece k runs at beta * its model's beta")
    return out


# -- statistics -------------------------------------------------------------------------


def wilson_interval(successes: np.ndarray, trials: int, confidence: float = 0.95
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval for a binomial proportion (two-sided, level ``confidence``)."""
    if not 0 < confidence < 1:
        msg = f"confidence must lie in (0, 1), got {confidence!r}"
        raise ValueError(msg)
    k = np.asarray(successes, dtype=float)
    m = float(trials)
    z = norm.ppf(0.5 + confidence / 2)
    p = k / m
    den = 1.0 + z * z / m
    centre = (p + z * z / (2 * m)) / den
    half = z / den * np.sqrt(p * (1 - p) / m + z * z / (4 * m * m))
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


def first_crossing(values: np.ndarray, times: np.ndarray, level: float = 0.5) -> np.ndarray:
    """The first time at which ``values`` (last axis: time) reaches ``level``; NaN if never."""
    v = np.asarray(values)
    hit = v >= level
    idx = np.argmax(hit, axis=-1)
    out = np.asarray(times, dtype=float)[idx]
    return np.where(hit.any(axis=-1), out, np.nan)


# -- random starts and matrices ---------------------------------------------------------


def sample_tokens(rng: np.random.Generator, realizations: int, n: int, d: int, *,
                  reduce: bool = True) -> np.ndarray:
    """I.i.d. uniform tokens on ``S^{d-1}``, shape ``(realizations, n, m)``.

    ``m = d``, except when ``reduce`` and ``d > n``: then ``m = n`` and the tokens are the
    normalised rows of the Bartlett factor of a Wishart matrix, which have the same Gram
    matrix law as ``n`` uniform points of ``S^{d-1}`` (valid for rotation-equivariant
    dynamics, ``Q = K = V = I``).
    """
    if reduce and d > n:
        x = np.tril(rng.standard_normal((realizations, n, n)), -1)
        diag = np.sqrt(rng.chisquare(d - np.arange(n), size=(realizations, n)))
        x[:, np.arange(n), np.arange(n)] = diag
    else:
        x = rng.standard_normal((realizations, n, d))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    return x


def _ensemble(rng: np.random.Generator, kind: str, realizations: int, d: int) -> np.ndarray:
    g = rng.standard_normal((realizations, d, d))
    if kind == "ginibre":
        return g / math.sqrt(d)
    return (g + g.swapaxes(-1, -2)) / math.sqrt(2 * d)  # goe


def sample_matrices(rng: np.random.Generator, realizations: int, d: int, qk: str = "identity",
                    v: str = "identity") -> tuple[np.ndarray | None, np.ndarray | None]:
    """Per-realisation ``B = Qᵀ K`` and ``V`` (``None`` for the identity), Figure 5.

    Ginibre matrices have i.i.d. ``N(0, 1/d)`` entries, GOE ones ``(G + Gᵀ)/√(2d)``, so that
    ``|M x| ≈ 1`` for a unit ``x``. ``v="qk"`` sets ``V = Qᵀ K``.
    """
    if qk not in QK_ENSEMBLES:
        msg = f"qk must be one of {QK_ENSEMBLES}, got {qk!r}"
        raise ValueError(msg)
    if v not in V_ENSEMBLES:
        msg = f"v must be one of {V_ENSEMBLES}, got {v!r}"
        raise ValueError(msg)
    if qk == "ginibre":
        b = _ensemble(rng, "ginibre", realizations, d).swapaxes(-1, -2) @ _ensemble(
            rng, "ginibre", realizations, d)
    elif qk == "goe":
        b = _ensemble(rng, "goe", realizations, d)
    else:
        b = None
    if v == "qk":
        val = b
    elif v == "identity":
        val = None
    else:
        val = _ensemble(rng, v, realizations, d)
    return b, val


# -- the phase diagram ------------------------------------------------------------------


def check_backend(backend: str | None, device: str | None, dtype: str | None, *,
                  here: bool = True) -> bk.Backend:
    """The cells' :class:`meanfield.backend.Backend`, checked (``ValueError`` naming the
    field). ``here=False`` (cells on the workers of an existing scheduler): a CUDA device is
    only parsed, its presence is left to the workers, which may have GPUs this process lacks."""
    if here or backend != "torch" or device is None:
        return bk.get_backend(backend, device, dtype)
    b = bk.get_backend(backend, "cpu", dtype)
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        msg = f"device must be a torch device such as 'cpu' or 'cuda:0', got {device!r}"
        raise ValueError(msg) from None
    return bk.Backend(b.name, str(dev), b.dtype)


def chunk_size(shape: tuple[int, ...], device: str | None, dtype: str = "float64") -> int:
    """Realisations integrated together, for starts of ``shape`` ``(realisations, n, m)``
    (``m`` the dimension integrated) in ``dtype``: on the CPU as many as keep the state
    within :data:`CHUNK_STATE_BYTES`, at least 1 and at most :data:`CHUNK`; on a GPU all of
    them (it wants large batches). The numbers do not depend on it (independent
    realisations, batched products)."""
    realizations, n, m = (int(k) for k in shape)
    if device is not None and not str(device).startswith("cpu"):  # a GPU
        return max(1, realizations)
    return max(1, min(CHUNK, CHUNK_STATE_BYTES // (n * m * np.dtype(dtype).itemsize)))


def _check_attention(attention: str) -> str:
    """The canonical name of ``attention``; ``ValueError`` (naming the solvers that support
    it) unless the registry declares it for the phase diagram."""
    return attention_registry.require(attention, "phase_diagram").name


def _check_delta(delta: float) -> None:
    if not 0 < float(delta) < 1:
        msg = f"delta must lie in (0, 1), got {delta!r}"
        raise ValueError(msg)


def _grid(name: str, value: int | Sequence[float], lo: float, hi: float) -> np.ndarray:
    if np.ndim(value) == 0:
        count = int(value)  # type: ignore[arg-type]
        if count < 1 or count != value:
            msg = f"{name} must be a positive integer or a non-empty sequence, got {value!r}"
            raise ValueError(msg)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
            msg = f"{name}: the range [{lo}, {hi}] is empty or not finite"
            raise ValueError(msg)
        return np.linspace(lo, hi, count)
    arr = np.asarray(value, dtype=float)
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)):
        msg = f"{name} must be a positive integer or a non-empty sequence, got {value!r}"
        raise ValueError(msg)
    return arr


MAX_STEPS = 1_000_000
"""The most RK4 steps one realisation may take to reach ``t_max``: a step that needs more
(a tiny ``dt``, or USA's ``dt e^{-beta}`` at a large ``beta``) is refused before any cell
runs (:func:`check_cell_steps`), with the estimate."""


def check_cell_steps(times: ArrayLike, dt: float, betas: ArrayLike,
                     attention: str, max_steps: int = MAX_STEPS) -> None:
    """Refuse, before any work, a step whose cells could not finish: ``ValueError`` with the
    estimated number of steps at the largest ``beta`` (for USA the step is ``dt e^{-beta}``,
    :func:`usa_step`, counted in logarithms so that ``beta = 1000`` is judged, not rounded to
    a step of 0). Also refuses a ``dt`` that is not finite and > 0."""
    if not (math.isfinite(dt) and dt > 0):
        msg = f"dt must be finite and > 0, got {dt!r}"
        raise ValueError(msg)
    t = np.asarray(times, dtype=float)
    span = float(t[-1] - t[0]) if t.size else 0.0
    if span <= 0:
        return
    if _check_attention(attention) == "softmax":
        check_step_count(t, float(dt), max_steps, dense=True)
        return
    beta = float(np.max(betas))
    log10_steps = math.log10(span / dt) + beta / math.log(10)
    if log10_steps > math.log10(max_steps):
        beta_ok = math.log(max_steps * dt / span)
        msg = (f"attention='unnormalized' steps dt e^{{-beta}} (usa_step: its stiffest rate "
               f"grows as e^beta): at beta = {beta:.6g}, dt = {dt:g} needs about "
               f"10^{log10_steps:.1f} steps to reach t = {t[-1]:.6g}, more than max_steps = "
               f"{max_steps}: the run could not finish in reasonable time; take beta <= "
               f"{beta_ok:.3g} for this t_max and dt, or a shorter t_max")
        raise ValueError(msg)
    check_step_count(t, usa_step(dt, beta, attention), max_steps, dense=True,
                     name="dt e^{-beta}", what=f"beta = {beta:.6g}")


def _largest_betas(betas: np.ndarray, schedule: Schedule | None) -> np.ndarray:
    """The ``beta`` of the stiffest piece of each cell (the step check of USA, whose step
    shrinks as ``e^{-beta}``): ``betas`` times the largest factor of the schedule."""
    if schedule is None:
        return betas
    return betas * max(m.beta for m in schedule.models)


def usa_step(dt: float, beta: float, attention: str) -> float:
    """The RK4 step: ``dt`` for SA; ``dt * exp(-beta)`` for USA, whose field is ``Z_i / n``
    times the SA one with ``Z_i = Σ_j e^{beta <x_i, x_j>} <= n e^{beta}`` (docs/equations.md section
    2), so that its stiffest rate (a cluster contracting) is ``e^{beta}`` times larger."""
    if _check_attention(attention) == "softmax":
        return dt
    check_exp_beta(beta, "unnormalized attention in the ensembles (the step dt e^-beta)")
    return dt * math.exp(-beta)


def cell_cost(d: int, beta: float) -> float:
    """An estimate of a cell's relative cost, for the order of work on a cluster
    (:func:`validation.sweep.task_chunks`): it grows with ``d`` (larger states) and ``beta``
    (the starts cluster later, so fewer are frozen; measured 3-4x more time at beta = 9 than
    at 0.1, d = 128, n = 32); only its order matters."""
    return float(d) * (1.0 + float(beta))


def phase_cell(beta: float, d: int, rng: np.random.Generator, *, n: int, times: Sequence[float],
               delta: float, realizations: int, attention: str, qk: str | Sequence[str],
               v: str | Sequence[str], dt: float, confidence: float, backend: str = "numpy",
               device: str | None = None, dtype: str = "float64",
               schedule: Schedule | None = None) -> xr.Dataset:
    """One ``(d, beta)`` cell of the phase diagram (used by :func:`phase_diagram`), on the
    array backend ``backend``, ``device``, ``dtype`` (:mod:`meanfield.backend`); under
    ``schedule`` piece ``k`` runs at ``beta * model_k.beta`` (:func:`schedule_at`).

    Raises :class:`meanfield.integrate.Interrupted` when interrupted and
    :class:`particles.ensemble.EnsembleError` when a block of realisations did not reach
    the final time (non-finite states, a step beyond the stability bound): a cell is a result
    only when every realisation ran to ``times[-1]`` (:func:`meanfield.integrate.finish`)."""
    laws = _laws(qk, v, schedule)
    identity = all(q == "identity" and w == "identity" for q, w in laws)
    x0 = sample_tokens(rng, realizations, n, d, reduce=identity)
    bilinear, value = _draws(rng, realizations, d, laws)
    run, step = _cell_run(beta, schedule, dt, attention)
    t = np.asarray(times, dtype=float)
    thr = 1.0 - delta
    pair12 = np.zeros(t.size, dtype=np.int64)
    pairs = np.zeros((t.size, realizations))
    inner12 = np.zeros(t.size)
    chunk = chunk_size(x0.shape, device, dtype)
    for start in range(0, realizations, chunk):
        part = slice(start, start + chunk)

        def record(k: int, _t: float, x: np.ndarray, part: slice = part) -> None:
            g12 = np.einsum("bd,bd->b", x[:, 0], x[:, 1])
            pair12[k] += np.count_nonzero(g12 >= thr)
            inner12[k] += g12.sum()
            gram = x @ np.ascontiguousarray(x.swapaxes(-1, -2))
            pairs[k, part] = (np.count_nonzero(gram >= thr, axis=(1, 2)) - n) / (n * (n - 1))

        sol = simulate_ensemble(x0[part], run, t, record, attention=attention,
                                bilinear=_part(bilinear, part), value=_part(value, part),
                                dt=step, freeze_above=thr if identity else None, backend=backend,
                                device=device, dtype=dtype)
        # a block cut short has counted only part of its outputs: never a result
        finish(sol, None, name=f"phase diagram cell d = {d}, beta = {beta:g} (realisations "
               f"{start}-{min(start + chunk, realizations) - 1})", error=EnsembleError)
    inner12 /= realizations
    t_cross = transition_time(run, n, delta, attention)
    lo, hi = wilson_interval(pair12, realizations, confidence)
    pmean = pairs.mean(axis=-1)
    perr = pairs.std(axis=-1, ddof=1) / math.sqrt(realizations) if realizations > 1 else (
        np.full(t.size, np.nan))
    return xr.Dataset(
        {
            "probability": ("time", pair12 / realizations),
            "probability_lower": ("time", lo),
            "probability_upper": ("time", hi),
            "pair_probability": ("time", pmean),
            "pair_probability_stderr": ("time", perr),
            "mean_inner_product": ("time", inner12),
            "gamma": ("time", gamma(run, n, t, attention)),
            "transition_time": ((), t_cross, note_nonfinite(
                {"long_name": "time at which the curve (6.12) reaches 1 - delta"}, t_cross,
                "inf: the curve (6.12) does not reach 1 - delta before t = 1e6")),
        },
        coords={"time": ("time", t, {"long_name": "time t", "units": "1"})},
    )


def phase_diagram(
    n: int = 32,
    d: int | Sequence[int] = 2,
    beta_min: float = 0.1,
    beta_max: float = 9.0,
    betas: int | Sequence[float] = 90,
    t_max: float = 30.0,
    times: int | Sequence[float] = 200,
    delta: float = 1e-3,
    realizations: int = 1024,
    attention: str = "softmax",
    seed: int = 0,
    workers: int = 1,
    *,
    qk: str = "identity",
    v: str = "identity",
    dt: float = 0.3,
    confidence: float = 0.95,
    scheduler: Any = None,
    store: str | None = None,
    resume: bool = False,
    progress: bool = True,
    processes: bool = True,
    cells_per_task: int | None = None,
    backend: str = "numpy",
    device: str | None = None,
    dtype: str = "float64",
    on_failure: str = "stop",
    schedule: Schedule | None = None,
) -> xr.Dataset:
    """The probability that ``<x_1(t), x_2(t)> >= 1 - delta`` over ``(beta, time)``.

    Figure 3 of the paper with its defaults (docs/equations.md section 5), Figure 5 with ``qk``/``v``;
    the curve (6.12) from (6.9) (SA) or (6.10) (USA) comes with it.

    Args:
        n: tokens per realisation, ``>= 2``.
        d: dimension (``S^{d-1}``), ``>= 2``, or a sequence of them (adds a ``d`` dimension).
        beta_min, beta_max, betas: ``betas`` values from ``beta_min`` to ``beta_max``, or an
            explicit sequence ``betas``.
        t_max, times: ``times`` equispaced output times on ``[0, t_max]``, or a sequence.
        delta: the clustering threshold ``1 - delta``, ``0 < delta < 1``.
        realizations: independent uniform starts per cell.
        attention: ``"softmax"`` (SA) or ``"unnormalized"`` (USA).
        seed: root seed; cell ``(d, beta)`` number ``i`` uses ``SeedSequence(seed, (i,))``.
        workers: Dask workers (``1``: in this process), see :func:`validation.sweep.sweep`.
        qk, v: random-matrix ensembles (:data:`QK_ENSEMBLES`, :data:`V_ENSEMBLES`), drawn
            once per realisation; under a ``schedule``, a list gives one law a piece (each
            piece its own draw: layers with their own weights).
        dt: largest RK4 step for SA (0.3 keeps the probabilities within 1-2 starts of a
            4x finer step, see ``docs/sweeps.md``); USA uses ``dt * e^{-beta}``
            (:func:`usa_step`), so give it a short ``t_max`` at large ``beta``.
        confidence: level of the Wilson intervals.
        scheduler, store, resume, progress, processes, cells_per_task: passed to the sweep
            (:func:`validation.sweep.sweep`; on how many workers and how many cells a task,
            see docs/sweeps.md, "How many workers, threads per worker, task size").
        backend, device, dtype: the array backend of the cells (:mod:`meanfield.backend`:
            ``"numpy"`` or ``"torch"``, a torch device such as ``"cuda"``, ``"float64"`` or
            ``"float32"``); recorded in ``settings`` and in every cell's resume key. With
            ``device="cuda"`` and several Dask workers each worker gets one GPU
            (:class:`validation.cluster.PinGPU`; docs/sweeps.md, "Backends and GPUs").
        on_failure: a cell whose realisations did not all reach ``t_max`` (non-finite
            states, a step beyond the stability bound) stops the sweep (``"stop"``:
            :class:`validation.sweep.SweepError`) or is recorded as failed, NaN and left out
            of ``t_half`` (``"record"``; counted in ``num_rejected``, ``successful = 0``).
        schedule: layers with their own weights (docs/schedule.md, "Schedules in
            ensembles"): a :class:`meanfield.Schedule` of SA/USA models of ``attention``
            (checked by :func:`check_schedule`) whose ``beta`` are factors of the ``beta``
            axis: the cell at ``beta`` runs piece ``k`` at ``beta * model_k.beta`` on
            ``[t_k, t_{k+1})``, no step across a switch; ``gamma`` and ``transition_time``
            follow the same schedule (:func:`gamma`). Recorded in ``attrs["model"]``.

    An interrupt raises :class:`meanfield.integrate.Interrupted` whose ``.dataset`` holds
    the finished cells (the others NaN, ``successful = 0``); they are also kept in ``store``,
    from which ``resume=True`` computes only the missing ones. A step that could not finish
    (:func:`check_cell_steps`) is refused before any cell runs.

    Returns:
        Dataset on ``(beta, time)`` (``(d, beta, time)`` for a sequence of ``d``):
        ``probability`` with ``probability_lower/upper`` (Wilson), ``pair_probability``
        (all pairs ``i != j``) with its standard error, ``mean_inner_product``, ``gamma``
        (6.9)/(6.10), ``transition_time`` (the curve (6.12)) and ``t_half`` (first time the
        probability reaches 1/2) with ``t_half_lower/upper`` from the interval bounds.
    """
    if int(n) != n or n < 2:
        msg = f"n must be an integer >= 2, got {n!r}"
        raise ValueError(msg)
    ds_ = np.atleast_1d(np.asarray(d))
    if ds_.size == 0 or np.any(ds_ < 2) or np.any(ds_ != np.round(ds_)):
        msg = f"d must be an integer >= 2 or a non-empty sequence of them, got {d!r}"
        raise ValueError(msg)
    _check_delta(delta)
    attention = _check_attention(attention)
    if int(realizations) != realizations or realizations < 1:
        msg = f"realizations must be a positive integer, got {realizations!r}"
        raise ValueError(msg)
    if not (math.isfinite(t_max) and t_max >= 0):
        msg = f"t_max must be finite and >= 0, got {t_max!r}"
        raise ValueError(msg)
    beta_grid = _grid("betas", betas, float(beta_min), float(beta_max))
    if np.any(beta_grid < 0):
        msg = f"betas must be >= 0, got {beta_grid.min()}"
        raise ValueError(msg)
    time_grid = _grid("times", times, 0.0, float(t_max))
    if np.any(np.diff(time_grid) < 0) or time_grid[0] < 0:
        msg = "times must be sorted and >= 0"
        raise ValueError(msg)
    if schedule is not None:
        check_schedule(schedule, attention, qk, v)
    for q, w in _laws(qk, v, schedule):  # validates qk and v
        sample_matrices(np.random.default_rng(0), 0, 2, q, w)
    check_cell_steps(time_grid, float(dt), _largest_betas(beta_grid, schedule),
                     attention)  # before any cell runs
    b = check_backend(backend, device, dtype, here=scheduler is None)
    kwargs: dict[str, Any] = dict(
        n=int(n), times=time_grid.tolist(), delta=float(delta), realizations=int(realizations),
        attention=attention, qk=list(qk) if isinstance(qk, (list, tuple)) else qk,
        v=list(v) if isinstance(v, (list, tuple)) else v, dt=float(dt),
        confidence=float(confidence), backend=b.name, device=b.device, dtype=b.dtype)
    if schedule is not None:  # only then: the cells' resume keys of plain runs stay as they were
        kwargs["schedule"] = schedule
    try:
        out = sweep(phase_cell, {"d": ds_.astype(int), "beta": beta_grid}, seed=seed,
                    workers=workers, scheduler=scheduler, store=store, resume=resume,
                    progress=progress, processes=processes, kwargs=kwargs,
                    desc="phase diagram", cells_per_task=cells_per_task, device=b.device,
                    cost=cell_cost, on_failure=on_failure)
    except (Interrupted, SweepError) as exc:  # the finished cells, marked unsuccessful
        if exc.dataset is not None:
            exc.dataset = _phase_result(exc.dataset, time_grid, ds_, d, kwargs, attention, qk,
                                        v, dt)
        raise
    return _phase_result(out, time_grid, ds_, d, kwargs, attention, qk, v, dt)


def _phase_result(out: xr.Dataset, time_grid: np.ndarray, ds_: np.ndarray, d: Any,
                  kwargs: dict[str, Any], attention: str, qk: str, v: str,
                  dt: float) -> xr.Dataset:
    """The sweep's Dataset completed: ``t_half`` and its bounds, units, the result schema
    (``successful`` and ``stop_reason`` as the sweep says: a sweep interrupted, or with
    failed cells, is not a success)."""
    lo = first_crossing(out["probability_upper"].values, time_grid)
    hi = first_crossing(out["probability_lower"].values, time_grid)
    out["t_half"] = (("d", "beta"), first_crossing(out["probability"].values, time_grid))
    out["t_half_lower"] = (("d", "beta"), lo)
    out["t_half_upper"] = (("d", "beta"), hi)
    out["beta"].attrs.update(long_name="inverse temperature beta", units="1")
    out["d"].attrs.update(long_name="dimension d (tokens on S^{d-1})", units="1")
    out["probability"].attrs.update(
        long_name="P(<x_1(t), x_2(t)> >= 1 - delta)", units="1")
    out["pair_probability"].attrs.update(
        long_name="fraction of pairs i != j with <x_i, x_j> >= 1 - delta", units="1")
    out["transition_time"].attrs.update(
        long_name="t with gamma_beta(t) = 1 - delta, curve (6.12)", units="1")
    never = "NaN where the probability{} never reaches 1/2 up to the last time"
    note_variables(out, {
        "transition_time": "inf: the curve (6.12) does not reach 1 - delta before t = 1e6",
        "t_half": never.format(""), "t_half_lower": never.format(" (upper bound)"),
        "t_half_upper": never.format(" (lower bound)")})
    schedule = kwargs.get("schedule")
    settings = dict(json.loads(out.attrs["settings"]), d=ds_.astype(int).tolist(),
                    method="RK4 + projection, cubic Hermite output (particles.ensemble)",
                    **{k: a for k, a in kwargs.items() if k != "schedule"})
    model = model_record(attention, schedule, qk=qk, v=v)
    out.attrs.update(revise_attrs(
        out.attrs, title="phase diagram of clustering (Figure 3 of arXiv 2312.10794)",
        solver="validation.phase_diagram", model=json.dumps(model), settings=settings,
        scheme="rk4", controller="ConstantStep", dt=float(dt),
        t_reached=float(time_grid[-1])))
    if np.ndim(d) == 0:
        out = out.squeeze("d")
    return out


__all__ = [
    "ATTENTIONS", "CHUNK", "CHUNK_STATE_BYTES", "MAX_STEPS", "QK_ENSEMBLES", "V_ENSEMBLES",
    "cell_cost", "check_backend", "check_cell_steps", "check_schedule", "chunk_size",
    "first_crossing", "gamma", "phase_cell",
    "model_record", "phase_diagram", "sample_matrices", "sample_tokens", "schedule_at",
    "transition_time",
    "usa_step", "wilson_interval",
]
