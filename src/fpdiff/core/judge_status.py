"""How far the float64 judge's reading stands, as its cross-check found (JudgeCheck.status, the report's
judge.status): judging/judge.py decides it, reports show it; here, at the bottom, so that both speak one
vocabulary and no report reads the judge's own module."""
from __future__ import annotations

from enum import Enum


class JudgeStatus(str, Enum):
    """The judge's states; their values are the strings the JSON report's judge.status has always carried."""
    AGREES = "agrees"
    SUSPECT = "suspect"
    UNCHECKED = "unchecked"
    SAME_CODE = "same-code"
    OVERRULED = "overruled"
    UPHELD = "upheld"
    FAILED = "failed"

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


AGREES, SUSPECT, UNCHECKED, SAME_CODE = (JudgeStatus.AGREES, JudgeStatus.SUSPECT, JudgeStatus.UNCHECKED,
                                       JudgeStatus.SAME_CODE)
# When the judge is suspect, more independent implementations are asked (backends declaring `independent`, at fp32).
# OVERRULED: at least two of them agree with each other and not with the judge, and they outnumber the judge with
# the witnesses on its side (the judge is one voice): the judge is wrong on this model, and cells are judged against
# the majority's reading. UPHELD: at least two witnesses agree with the judge, more than agree against it: the
# first independent implementation is the odd one out, and the judge stands. Anything else stays SUSPECT.
OVERRULED, UPHELD = JudgeStatus.OVERRULED, JudgeStatus.UPHELD
# The judge's float64 run itself failed (an op of the reference evaluator raised): no cell can be judged against it.
# When at least two independent fp32 implementations agree with each other, their reading stands in (as for an
# overruled judge); otherwise every cell that ran is `unjudged`, with the judge's failure as its reason.
FAILED = JudgeStatus.FAILED
