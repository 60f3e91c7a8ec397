"""``sample_hais``: the evidence of a PyMC model, a drop-in for ``pm.sample_smc``.

Example
-------
>>> import numpy as np, pymc as pm
>>> from ppl_hais.adapters import pymc as php
>>> with pm.Model():
...     mu = pm.Normal("mu", 0.0, 2.0)
...     y = pm.Normal("y", mu, 1.0, observed=np.array([0.3, -0.5, 1.1]))
...     idata = php.sample_hais(draws=128, num_steps=300, chains=2, random_seed=0,
...                             progressbar=False)
>>> idata.posterior["mu"].shape
(2, 128)
"""

from __future__ import annotations

import inspect

import numpy as np
import pymc as pm

# PyMC module functions that `pm.` does not re-export (no public equivalent on PyMC 5.28 or 6.4):
# the coords/dims/observed/constant helpers pm.sample uses for its own ArviZ output, the prior
# initial-point expression pm.sample_smc draws its population with, the JAX graph of
# pymc.sampling.jax. Same names and behaviour on both versions, pinned by tests/test_pymc.py
# (evidence against exact values, coords/dims) and tests/test_stack.py (constant_data).
from pymc.backends.arviz import coords_and_dims_for_inferencedata, find_constants, find_observations

from ppl_hais.annealing.execution import using_cores
from ppl_hais.mcmc.fast_random import host_key, host_split
from ppl_hais.results.arviz import from_ais
from ppl_hais.runtime.names import did_you_mean
from ppl_hais.runtime.precision import float64
from ppl_hais.workflow.evidence import evidence
from ppl_hais.workflow.memory import Memory
from ppl_hais.workflow.options import EvidenceOptions

from .bridge import shift_intercepts
from .target import cached_target, is_bambi, pymc_model

# pm.sample_smc's keywords that have no meaning here, and what to use instead
_SMC_ONLY = {
    "kernel": "HAIS moves particles by persistent-momentum HMC; tune it with step_size=/refresh=",
    "start": "annealing starts from the initial distribution: use initial=",
    "threshold": "the temperatures are set by schedule= (equal thermodynamic length by default)",
    "correlation_threshold": "the number of temperatures is num_steps=",
    "blas_cores": "sample_hais runs the model compiled to JAX, not PyTensor's C backend",
    "backend": "sample_hais compiles the model to JAX itself",
    "compile_kwargs": "sample_hais compiles the model to JAX itself",
    "mp_ctx": "chains run in this process (vectorized over particles), not in subprocesses",
    "progressbar_theme": "the progress bar is tqdm's",
}


def _check_arguments(model, draws, chains, cores, return_inferencedata, unknown):
    if model is not None and not isinstance(model, pm.Model) and not is_bambi(model):
        hint = (
            " (a NumPyro model function? use ppl_hais.adapters.numpyro.HAIS)"
            if callable(model)
            else ""
        )
        raise TypeError(f"model must be a pm.Model or a bambi.Model, got "
                        f"{type(model).__name__}{hint}")  # fmt: skip
    for name in unknown:
        known = [*inspect.signature(sample_hais).parameters, *EvidenceOptions.names()]
        reason = _SMC_ONLY.get(
            name, "it is not a keyword of sample_hais" + did_you_mean(name, known)
        )
        raise TypeError(f"sample_hais does not take {name}=: {reason}")
    if not return_inferencedata:
        raise ValueError(
            "return_inferencedata=False (a MultiTrace) is not supported: sample_hais returns "
            "ArviZ output (DataTree on ArviZ >= 1, InferenceData on 0.x)"
        )
    # draws bound the default particles (min(draws, 512)): the error bar needs two of them
    for name, value, least in (("draws", draws, 2), ("chains", chains, 1)):
        if isinstance(value, bool) or int(value) != value or value < least:
            need = "a positive integer" if least == 1 else f"an integer of at least {least}"
            why = (" (the particles, min(draws, 512) by default: the error bar needs a spread)"
                   if least > 1 else "")  # fmt: skip
            raise ValueError(f"{name} must be {need}{why}, got {value!r}")
    if cores is not None and (isinstance(cores, bool) or int(cores) != cores or cores < 1):
        raise ValueError(f"cores must be a positive integer or None, got {cores!r}")


@float64
def sample_hais(
    draws: int = 1000,
    num_steps: int | None = None,
    *,
    chains: int | None = None,
    cores: int | None = None,
    num_particles: int | None = None,
    random_seed=None,
    model=None,
    progressbar: bool = True,
    compute_convergence_checks: bool = True,
    return_inferencedata: bool = True,
    idata_kwargs: dict | None = None,
    options: EvidenceOptions | dict | None = None,
    memory: Memory | None = None,
    **kwargs,
):
    """Log marginal likelihood and posterior of a PyMC model by HAIS, like ``pm.sample_smc``.

    Parameters
    ----------
    draws : int
        Posterior draws per chain (as in ``pm.sample_smc``), resampled from the annealed
        particles by their weights.
    num_steps : int, optional
        Number of temperatures. Default ``None``: the convergence ladder
        (:mod:`ppl_hais.checks.ladder`): 250 temperatures, then 4× as many while a trust check
        fails and ``max_gradients`` allows; the rungs are in sample_stats (``ladder_*``, dim
        ``rung``) and :func:`ppl_hais.results.plots.plot_convergence` draws them. A number: exactly
        one run of that many, whose weights' failed checks are cleared where its bias check
        agrees (:func:`ppl_hais.checks.ladder.clears`).
    chains : int, optional
        Independent runs (their evidence estimates are pooled by ``ph.compare_evidence``);
        default 1 (each chain is already ``draws`` independent annealing runs).
    cores : int, optional
        CPU cores to use (default: all this process may use). The chains run in this process,
        vectorized over their particles, which the annealer splits into groups on threads (of
        64 particles, the pilot's size, where that gives one to eight per core, past that of
        512; else two per core); on an accelerator it has no effect.
    num_particles : int, optional
        Particles per chain, each an independent annealing run. Default ``min(draws, 512)``,
        the annealer's default (as ``phn.HAIS``'s): past a few hundred, a gradient buys more
        accuracy as temperatures than as particles, and the convergence ladder spends it so.
        ``pm.sample_smc``'s population is its ``draws``; ``num_particles=draws`` anneals as many.
    random_seed : int, optional
    model : pm.Model or bambi.Model, optional
        Default: the model from the ``with`` context. A Bambi model goes in as it is (built
        if it is not): its evidence is that of the PyMC model Bambi builds.
    progressbar : bool
    compute_convergence_checks : bool
        Accepted as ``pm.sample_smc`` accepts it. The evidence's trust checks always run and
        warn: they are what makes the error bar trustworthy.
    return_inferencedata : bool
        Must be True (ArviZ output only).
    idata_kwargs : dict, optional
        ``{"log_likelihood": True}`` adds the pointwise log likelihood (for ``az.loo``).
    options : ppl_hais.EvidenceOptions or dict, optional
        The evidence's options, each documented there: ``initial`` (where annealing starts),
        ``target_se``, ``max_gradients``, ``bias_check``, ``bidirectional``, the pilot's
        ``schedule``, ``step_size`` and ``adapt_mass_matrix``, the transition's
        ``num_leapfrog``, ``flips``, ``lookahead``, ``refresh`` and ``local_steps``. The keywords
        above (``num_steps``, ``chains``, ``num_particles``) replace its fields of those names.
    **kwargs
        Its fields by name, replacing the object's: ``sample_hais(initial="laplace")``.
    memory : ppl_hais.adapters.pymc.Memory, optional
        Keep the start, its tuning and where the ladder stopped for the next call given the
        same memory on the same model and data, which runs no pilot and begins at that rung
        (``memory = php.Memory()``, then ``memory=memory`` in each call). Calls that share a
        memory share one pilot's luck; without one (default) every call tunes from its own
        seed and calls with different seeds are independent.

    Returns
    -------
    idata : arviz.InferenceData (ArviZ 0.x) or xarray.DataTree (ArviZ >= 1)
        As ``pm.sample_smc``'s: ``posterior`` (constrained variables and deterministics,
        model coords/dims),
        ``sample_stats`` with the call's estimate ``log_evidence`` and ``log_evidence_se``
        (the chains pooled; the convergence ladder's bridge or cleared SE where it gave one),
        each chain's ``log_marginal_likelihood`` and its standard error
        ``log_marginal_likelihood_se`` (dims: chain; ``pm.sample_smc`` stores one object
        array per stage instead; ``inf`` when the weights' variance does not exist),
        ``importance_ess``, ``pareto_k``, ``lag`` and ``evidence_warning`` per chain, the failed
        checks' sentences in the group's ``evidence_checks`` attribute and their names in
        ``evidence_check_names``; ``observed_data``, ``constant_data``. The posterior draws
        are particles resampled by weight, copies side by side, so ``az.ess`` of them stays
        near the importance ESS.

    Notes
    -----
    A failed trust check (Pareto k̂, importance ESS, chains' agreement) raises
    :class:`ppl_hais.EvidenceWarning` naming the check and the remedy.
    Other keywords of ``pm.sample_smc`` (``kernel``, ``start``, ``threshold``, ``backend``,
    ``mp_ctx``, ...) are refused by name with what to use instead.
    """
    _check_arguments(model, draws, 1 if chains is None else chains, cores, return_inferencedata,
                     [k for k in kwargs if k not in EvidenceOptions.names()])  # fmt: skip
    options = EvidenceOptions.of(options, "sample_hais", **kwargs)
    options = options.replace(
        num_steps=options.num_steps if num_steps is None else num_steps,
        num_chains=options.num_chains if chains is None else chains,
        num_particles=min(int(draws), options.num_particles) if num_particles is None
        else num_particles)  # fmt: skip
    bambi = model if is_bambi(model) else None
    model = pymc_model(model)
    seed = np.random.default_rng(random_seed).integers(2**31 - 1)
    target = cached_target(model)
    key_run, key_draws = host_split(host_key(int(seed)))
    with using_cores(cores):
        ev = evidence(key_run, target, options, progress_bar=progressbar, memory=memory)
    chains = options.num_chains
    results = ev.results
    idx = ev.resample(key_draws, num_draws=int(draws))
    zs = np.stack([r.particles[i] for r, i in zip(results, idx, strict=True)])
    posterior = target.posterior(zs, chains, draws)
    if bambi is not None:  # its intercepts as Bambi reports them
        posterior = shift_intercepts(bambi, posterior, sign=-1)
    coords, dims = coords_and_dims_for_inferencedata(model)
    idata = from_ais(
        results,
        posterior,
        observed_data=find_observations(model),
        constant_data=find_constants(model),
        coords=coords,
        dims=dims,
        library="ppl_hais (pymc)",
        checks=ev.checks,
        initial=ev.initial,
        bias=ev.bias,
        trajectory=ev.trajectory,
        evidence=ev,
    )
    if (idata_kwargs or {}).get("log_likelihood", False):
        pm.compute_log_likelihood(idata, model=model, progressbar=False)
    return idata
