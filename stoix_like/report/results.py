"""What a report holds, per env and in all: the types the report's builder (build.py) fills and its tables
(tables.py) and figures read, in a module of their own so that neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from stoix_like.report import runs, statistics
from stoix_like.report.statistics import CurveEstimate, Estimate


@dataclass
class EnvResults:
    env: str
    groups: List[runs.Group]  # by label
    aggregates: Dict[str, Dict[str, Estimate]]  # label -> IQM / Median / Mean of absolute returns
    best_eval: Dict[str, float]  # label -> IQM over seeds of each seed's best evaluation
    mean_curves: Dict[str, CurveEstimate]
    iqm_curves: Dict[str, CurveEstimate]
    improvements: Dict[Tuple[str, str], Estimate]  # (X, Y) -> P(X > Y)
    curve_file: str

    @property
    def solved_return(self) -> Optional[float]:
        values = {group.solved_return for group in self.groups} - {None}
        return values.pop() if len(values) == 1 else None


@dataclass
class Report:
    envs: List[EnvResults]
    command: str
    reps: int
    confidence: float = statistics.CONFIDENCE
    files: List[str] = field(default_factory=list)
