"""The posteriordb posteriors copied into the package (``data/``; README there: source, licence)."""
from __future__ import annotations

import functools
import json
from pathlib import Path

DATA_DIR = Path(__file__).parent / "data"

# posteriordb's posterior names (file stems) of the posteriors shipped here.
POSTERIORS = ("eight_schools-eight_schools_noncentered", "diamonds-diamonds")


@functools.lru_cache(maxsize=None)
def load_posterior(name: str) -> dict:
    """The posteriordb JSON of ``name`` (stan_code, data, reference): parsed once, do not mutate."""
    if name not in POSTERIORS:
        raise ValueError(f"unknown posteriordb posterior {name!r}; shipped: "
                         f"{', '.join(POSTERIORS)}")
    with open(DATA_DIR / f"{name}.json", encoding="utf-8") as f:
        return json.load(f)
