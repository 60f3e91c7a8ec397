"""Unknown keyword arguments refused the way Python refuses them, with the closest known name."""

from __future__ import annotations

# ``num_steps`` counts temperatures in the annealer and leapfrog steps in NumPyro's HMC; the
# samplers here call the latter num_leapfrog
LEAPFROG_HINT = {"num_steps": "leapfrog steps per transition are num_leapfrog="}


def did_you_mean(name: str, known) -> str:
    """" (did you mean 'x'?)" for the closest of ``known`` names, or ""."""
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def refuse_unknown(kwargs: dict, where: str, known=(), hints=None) -> None:
    """A TypeError like Python's own for keywords left in ``kwargs``, with the closest of
    ``known`` names suggested, or ``hints[name]`` where a name means something else here."""
    if kwargs:
        name = next(iter(kwargs))
        hint = f" ({hints[name]})" if hints and name in hints else did_you_mean(name, known)
        raise TypeError(f"{where}() got an unexpected keyword argument {name!r}{hint}")
