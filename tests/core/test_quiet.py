"""A component's chatter is kept out for one call and its logger's level comes back after."""
import logging

from fpdiff.core.quiet import quieted


def test_the_streams_named_are_swallowed_and_the_level_restored(capsys):
    log = logging.getLogger("fpdiff-test-chatter")
    log.setLevel(logging.INFO)
    with quieted("fpdiff-test-chatter", stdout=True):
        print("progress 10%")
        assert log.level == logging.ERROR
    with quieted("fpdiff-test-chatter", stderr=True):
        import sys
        print("partial graph", file=sys.stderr)
    print("kept")
    out = capsys.readouterr()
    assert out.out == "kept\n" and out.err == "" and log.level == logging.INFO
