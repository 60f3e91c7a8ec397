"""``bridge_sampling``: the evidence of a NumPyro model from the posterior draws of its MCMC.

Example
-------
>>> import jax, jax.numpy as jnp, numpyro, numpyro.distributions as dist
>>> from numpyro.infer import MCMC, NUTS
>>> from ppl_hais.adapters import numpyro as phn
>>> def model(y=None):
...     mu = numpyro.sample("mu", dist.Normal(0.0, 2.0))
...     numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)
>>> y = jnp.array([0.3, -0.5, 1.1])
>>> mcmc = MCMC(NUTS(model), num_warmup=500, num_samples=1000, num_chains=2,
...             chain_method="sequential", progress_bar=False)
>>> mcmc.run(jax.random.key(0), y=y)
>>> res = phn.bridge_sampling(mcmc, model, y=y)
>>> round(res.log_z, 1), res.warning   # exact: -4.69
(-4.7, False)
"""

from __future__ import annotations

import jax
import numpy as np
from jax.flatten_util import ravel_pytree
from numpyro import handlers
from numpyro.infer.util import unconstrain_fn

from ppl_hais.results.arviz import group, group_names
from ppl_hais.runtime.precision import float64
from ppl_hais.workflow.model_bridge import bridge_evidence

from .target import NumPyroTarget

__all__ = ["bridge_sampling"]


def _samples(mcmc_or_samples, group_by_chain):
    """{site: (chains, draws, ...)} from an MCMC, an ArviZ posterior, or a dict of samples."""
    obj = mcmc_or_samples
    if hasattr(obj, "get_samples"):
        return {k: np.asarray(v) for k, v in obj.get_samples(group_by_chain=True).items()}
    if type(obj).__name__ in ("InferenceData", "DataTree"):  # az.from_numpyro(...)
        if "posterior" not in group_names(obj):
            raise ValueError("the InferenceData has no posterior group to take draws from")
        post = group(obj, "posterior")
        return {k: np.asarray(post[k].values) for k in post.data_vars}
    if isinstance(obj, dict):
        return {
            k: np.asarray(v) if group_by_chain else np.asarray(v)[None]
            for k, v in obj.items()
        }
    raise TypeError(
        "expected an MCMC object, an ArviZ InferenceData/DataTree with a posterior, or a dict "
        f"of samples; got {type(obj).__name__}"
    )


@float64
def bridge_sampling(
    mcmc_or_samples,
    model,
    *args,
    rng_key=None,
    method: str = "normal",
    cross_check: bool = False,
    mode_search: bool = True,
    group_by_chain: bool = False,
    progress_bar: bool = True,
    options=None,
    **kwargs,
):
    """log p(data | model) from posterior draws by bridge sampling (:mod:`ppl_hais.bridge`).

    Parameters
    ----------
    mcmc_or_samples : numpyro.infer.MCMC, dict or InferenceData
        The draws: an MCMC that has run (its chains are kept apart; its divergent transitions
        are checked), a dict of samples by site
        (flat ``(draws, ...)`` as ``mcmc.get_samples()`` gives them; ``(chains, draws, ...)``
        with ``group_by_chain=True``), or ``az.from_numpyro(mcmc)``. Values are in the
        constrained space the model sees; they are mapped to the unconstrained space by
        NumPyro's own transforms (``biject_to(support)``, Jacobians included). Deterministic
        sites are ignored; enumerated discrete sites are summed out of the density, as NUTS
        summed them out.
    model : callable
        The NumPyro model; ``*args``/``**kwargs`` are its arguments (the data), as for
        ``mcmc.run``.
    rng_key : jax.random key, optional
        For the proposal's draws (and the cross-check's anneals); default ``key(0)``.
    method : {"normal", "warp3", "student_t"}
        The proposal (:func:`ppl_hais.bridge_sampling`).
    cross_check : bool
        Also anneal: forward from the prior (a stochastic lower bound, no draws needed) and back
        from the draws; the three estimates are reported side by side and a disagreement warns.
    mode_search : bool
        Compare the draws with the modes a Laplace search finds (a few BFGS runs, cached on
        the model): a mode no chain visited that holds more mass than the error bar allows
        warns (``modes``), stating by how many nats the estimate may be low.
    options : ppl_hais.EvidenceOptions or dict, optional
        The cross-check's forward anneal's options (``num_particles``, ``num_steps``, ...).

    Returns
    -------
    ppl_hais.BridgeResult
        ``log_z``, ``log_z_se``, the checks (raised as one ``EvidenceWarning``),
        ``summary()``, ``to_arviz()``; ``ph.compare_evidence`` takes it.
    """
    key = jax.random.key(0) if rng_key is None else rng_key
    samples = _samples(mcmc_or_samples, group_by_chain)
    nt = NumPyroTarget(model, args, kwargs)
    if nt.discrete_names:
        raise ValueError(
            f"site(s) {nt.discrete_names} are discrete and not marked for enumeration: bridge "
            "sampling needs a density over continuous coordinates. Mark them for enumeration "
            "(config_enumerate: summed out, as NUTS does) or use phn.HAIS, which anneals them."
        )
    draws = unconstrained_draws(nt, samples)
    return bridge_evidence(
        key, nt, draws, method=method, cross_check=cross_check, mode_search=mode_search,
        progress_bar=progress_bar,
        diverging=_diverging(mcmc_or_samples), options=options,
    )  # fmt: skip


def _diverging(obj):
    """NUTS's divergent transitions: an MCMC's extra field or an InferenceData's sample_stats
    ``diverging``; None from a dict of samples."""
    if hasattr(obj, "get_extra_fields"):
        value = obj.get_extra_fields().get("diverging")
        return None if value is None else np.asarray(value)
    if type(obj).__name__ in ("InferenceData", "DataTree") and "sample_stats" in group_names(obj):
        ss = group(obj, "sample_stats")
        return np.asarray(ss["diverging"].values) if "diverging" in ss else None
    return None


def unconstrained_draws(nt: NumPyroTarget, samples) -> np.ndarray:
    """The draws of ``nt``'s latent sites as flat unconstrained vectors (chains, draws, D)."""
    missing = [n for n in nt.latent if n not in samples]
    if missing:
        have = sorted(samples)
        raise ValueError(
            f"the draws lack the model's latent site(s) {missing} (they hold {have}; a "
            "deterministic site cannot stand for the site it is computed from): pass the "
            "samples of the model that made them, with all its sample sites"
        )
    chains, per_chain = np.shape(samples[nt.latent[0]])[:2]
    params = {}
    for name in nt.latent:
        v = np.asarray(samples[name], dtype=float)
        if v.shape[:2] != (chains, per_chain):
            raise ValueError(
                f"site '{name}' has draws shaped {v.shape}, the others ({chains}, {per_chain}, "
                "...): every site needs the same chains and draws"
            )
        params[name] = v.reshape((chains * per_chain,) + v.shape[2:])
    args, kwargs = nt.args, nt.kwargs
    seeded = handlers.seed(nt.model, jax.random.key(0))

    def one(p):
        return ravel_pytree(unconstrain_fn(seeded, args, kwargs, p))[0]

    try:
        flat = jax.vmap(one)(params)
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"the draws do not fit the model's latent sites {nt.latent}: {err}"
        ) from err
    if flat.shape[-1] != nt.dim:
        raise ValueError(f"the draws give {flat.shape[-1]} coordinates, the model {nt.dim}")
    return np.asarray(flat).reshape(chains, per_chain, nt.dim)
