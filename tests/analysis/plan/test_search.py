"""The plan search against a fake evaluator (no backend runs): it finds a smallest passing keep-set wherever the
needed ops sit, never evaluates a set twice, and says so when even all-fp32 fails."""
import itertools

from fpdiff.analysis.plan.search import Search, Trial, Unit

NAMES = [f"op{i}" for i in range(24)]


def fake(needed: set[str], log: list):
    """Passes exactly when every needed op is kept (an interaction the search cannot see from single ops)."""
    def evaluate(keep: frozenset[str]) -> Trial:
        log.append(keep)
        ok = needed <= keep
        return Trial(sorted(keep), 0.0 if ok else 1.0, ok)
    return evaluate


def search(needed: set[str], ranked=(), strong=(), sources=()):
    log: list = []
    s = Search([Unit(n, "mul") for n in NAMES], fake(needed, log), tolerance=0.5)
    return s.run(list(ranked), list(strong), list(sources)), log


def test_nothing_needed_is_the_empty_plan_in_one_evaluation():
    found, log = search(set())
    assert found == frozenset() and len(log) == 1


def test_the_exact_needed_set_is_found_anywhere_without_evidence():
    for needed in ({"op0"}, {"op23"}, {"op3", "op17"}, {"op1", "op9", "op22"}):
        found, log = search(needed)
        assert found == needed, (needed, found)
        assert len(log) == len(set(log))  # no keep-set evaluated twice
        assert len(log) < 2 ** 6  # far from trying subsets: 24 ops, a few dozen evaluations at most


def test_good_evidence_makes_it_cheap_and_spare_evidence_is_dropped():
    needed = {"op5", "op6"}
    blind, blind_log = search(needed)
    found, log = search(needed, ranked=["op5", "op6", "op7"], strong=["op5", "op6", "op7"])
    assert found == needed == blind
    assert len(log) < len(blind_log)


def test_when_even_all_fp32_fails_there_is_no_plan():
    log: list = []
    s = Search([Unit(n, "mul") for n in NAMES], lambda keep: (log.append(keep), Trial(sorted(keep), 1.0, False))[1],
               tolerance=0.5)
    assert s.run([], []) is None
    assert frozenset(NAMES) in log


def test_every_pair_of_needed_ops_is_found_exactly():
    for pair in itertools.combinations(NAMES[::5], 2):
        found, _ = search(set(pair))
        assert found == set(pair), pair


def test_shares_rank_the_needed_ops_first_and_cost_few_evaluations():
    needed = {"op7", "op19"}
    blind, blind_log = search(needed)
    log: list = []
    s = Search([Unit(n, "mul") for n in NAMES], fake(needed, log), tolerance=0.5)
    share = {n: (0.4 if n in needed else 0.01) for n in NAMES}
    found = s.run([], [], [], share)
    assert found == needed == blind
    assert len(log) < len(blind_log) and len(log) == len(set(log))


def test_misleading_shares_still_find_the_needed_set():
    needed = {"op2", "op20"}
    log: list = []
    s = Search([Unit(n, "mul") for n in NAMES], fake(needed, log), tolerance=0.5)
    share = {n: (0.0 if n in needed else 0.3) for n in NAMES}  # the evidence points everywhere else
    assert s.run([], [], [], share) == needed


def test_progress_is_called_once_per_evaluation():
    calls: list = []
    log: list = []
    s = Search([Unit(n, "mul") for n in NAMES], fake({"op3", "op11"}, log), tolerance=0.5,
               progress=lambda what, done, total: calls.append((what, done, total)))
    s.run([], [])
    assert [c[1] for c in calls] == list(range(1, len(log) + 1)) and all(c[2] is None for c in calls)
    assert all(c[0].startswith("trial ") for c in calls)


def test_pruning_skips_a_set_inside_a_failed_one():
    log: list = []
    s = Search([Unit(n, "mul") for n in NAMES], fake({"op1"}, log), tolerance=0.5)
    s.trial(frozenset(NAMES[1:]))  # passes
    s.trial(frozenset(NAMES[2:]))  # fails: every subset of it is taken to fail
    assert s.known_to_fail(NAMES[5:]) and not s.known_to_fail(NAMES[:3])


def test_shares_rank_by_size_so_an_op_whose_rounding_cancels_is_still_first():
    from fpdiff.analysis.plan.search import by_share
    share = {"op0": 0.01, "op1": -0.3, "op2": 0.2, "op3": 0.0}
    assert by_share(share, ["op3", "op0", "op2", "op1"]) == ["op1", "op2", "op0", "op3"]


def test_a_needed_op_with_a_negative_share_costs_no_more_than_a_positive_one():
    needed = {"op7", "op19"}
    counts = []
    for sign in (1.0, -1.0):
        log: list = []
        s = Search([Unit(n, "mul") for n in NAMES], fake(needed, log), tolerance=0.5)
        share = {n: (sign * 0.4 if n == "op19" else 0.4 if n == "op7" else 0.01) for n in NAMES}
        assert s.run([], [], [], share) == needed
        counts.append(len(log))
    assert counts[0] == counts[1]


def test_ops_the_ranges_forbid_are_in_every_keep_set_after_the_pure_one_and_never_pruned():
    """`base` (ops reading or making values the format turns to inf) is kept before the search: every set tried
    after the pure one holds it, and the plan holds it even where the fake passes without it."""
    log: list = []
    s = Search([Unit(n, "mul") for n in NAMES], fake({"op7"}, log), tolerance=0.5)
    found = s.run(["op7"], ["op7", "op9"], base=frozenset({"op2", "op3"}))
    assert found == {"op2", "op3", "op7"}
    assert log[0] == frozenset() and all({"op2", "op3"} <= k for k in log[1:])
    assert len(log) == len(set(log))
