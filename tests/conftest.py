import jax
import pytest

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")


@pytest.fixture
def key():
    return jax.random.key(20261122)
