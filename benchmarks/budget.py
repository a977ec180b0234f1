"""Time budget for one benchmark process: sections share what is left, points check before running.

A section's cap is its share of the time still left, weighed against the shares of the sections not
yet run, so time a section leaves unused goes to the later ones. A point that would not fit (its
predicted cost exceeds what is left of its section's cap) is skipped and the reason recorded.
Nothing interrupts a point once it has started: predictions keep the overshoot small.
"""
from __future__ import annotations

import time


class Budget:
    def __init__(self, total_s: float, shares: dict[str, float]):
        self.start = time.perf_counter()
        self.total_s = total_s
        self.shares = dict(shares)
        self.done: set[str] = set()
        self.report: dict[str, dict] = {}

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def left(self) -> float:
        return self.total_s - self.elapsed()

    def section(self, name: str) -> "Section":
        pending = sum(share for key, share in self.shares.items() if key not in self.done)
        share = self.shares.get(name, 0.0)
        cap = max(0.0, self.left()) * (share / pending if pending else 1.0)
        self.done.add(name)
        return Section(self, name, cap)


class Section:
    def __init__(self, budget: Budget, name: str, cap_s: float):
        self.budget, self.name, self.cap_s = budget, name, cap_s
        self.start = time.perf_counter()
        self.notes: list[str] = []
        self.skipped = 0

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def left(self) -> float:
        return min(self.cap_s - self.elapsed(), self.budget.left())

    def allows(self, predicted_s: float = 0.0) -> bool:
        return self.left() > predicted_s

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(f"  note: {text}", flush=True)

    def __enter__(self) -> "Section":
        print(f"\n== {self.name}: start at +{self.budget.elapsed():.1f}s, cap {self.cap_s:.0f}s",
              flush=True)
        return self

    def __exit__(self, *exc) -> None:
        seconds = self.elapsed()
        self.budget.report[self.name] = {"seconds": round(seconds, 2),
                                         "cap_s": round(self.cap_s, 1),
                                         "skipped_points": self.skipped, "notes": self.notes}
        print(f"== {self.name}: {seconds:.1f}s (cap {self.cap_s:.0f}s), total "
              f"+{self.budget.elapsed():.1f}s of {self.budget.total_s:.0f}s", flush=True)
