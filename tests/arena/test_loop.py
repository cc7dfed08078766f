"""The run loop arena and stretch share (workers.run_jobs): a failing job is told at once and
the others go on; StopRun (a model that does not load) ends the run before the next job."""

import pytest

from posenc.arena.workers import InlineExecutor, StopRun, run_jobs


def work(job):
    if job == "bad":
        raise RuntimeError("boom")
    if job == "stop":
        raise StopRun("--model m: transformers cannot load it")
    return job.upper()


def test_a_failure_is_told_when_it_happens_and_the_grid_goes_on():
    events = []
    failed = run_jobs(["a", "bad", "c"], InlineExecutor({}), lambda j: "take",
                      lambda j, r: events.append(("ok", r)),
                      lambda j, e: events.append(("failed", j)), fn=work)  # fmt: skip
    assert events == [("ok", "A"), ("failed", "bad"), ("ok", "C")]
    assert [(j, str(e)) for j, e in failed] == [("bad", "boom")]


def test_stop_run_ends_the_run_at_once():
    done = []
    with pytest.raises(StopRun, match="cannot load"):
        run_jobs(["stop", "b", "c"], InlineExecutor({}), lambda j: "take",
                 lambda j, r: done.append(j), fn=work)  # fmt: skip
    assert done == []
