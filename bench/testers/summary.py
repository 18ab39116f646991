"""The benchmark's arithmetic: per-bug statuses and per-tester recall, false alarms and times."""

from __future__ import annotations

import statistics
from typing import Any

__all__ = ["detection_status", "summarize"]

CAUGHT = "caught"
TIMEOUT = "timeout"
TIMEOUT_MESSAGE = "killed after the timeout"


def detection_status(result: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The status of one (tester, bug) task from its worker's answer, and the fields to record.

    caught / missed / skipped (the tester cannot test this subject) / timeout (the
    harness killed it) / error (the harness failed).  A child that died counts as
    caught: under pytest the process would have crashed, which CI reports.  A
    timeout is not a detection: nothing failed before the harness gave up.
    """
    if "died" in result:
        return CAUGHT, {"case": "process died", "message": f"worker died, exit code {result['died']}"}
    if "timeout" in result:
        return TIMEOUT, {"case": "timeout", "seconds": result["timeout"], "message": TIMEOUT_MESSAGE}
    if "error" in result:
        return "error", {"message": result["error"]}
    if result.get("skipped"):
        return "skipped", {"message": result["skipped"]}
    keys = ("case", "dims", "size", "message", "seconds", "first_failure_s", "cpu_s", "first_failure_cpu_s", "cases")
    fields = {k: result.get(k) for k in keys}
    return (CAUGHT if result["failed"] else "missed"), fields


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def summarize(tester: str, detections: list[dict[str, Any]], alarms: list[dict[str, Any]],
              unavailable: str | None = None) -> dict[str, Any]:
    """One tester's row: recall (over all bugs, and over those detectable on this backend),
    false alarms over the correct-kernel runs, median/max time to detect, serial seconds."""
    mine = [d for d in detections if d["tester"] == tester]
    runs = [a for a in alarms if a["tester"] == tester and a["status"] != "skipped"]  # runs that tested something
    caught = [d for d in mine if d["status"] == CAUGHT]
    detectable = [d for d in mine if d.get("detectable", True)]
    caught_detectable = [d for d in detectable if d["status"] == CAUGHT]
    # time to detect: to the first failing example (before shrinking), else to the verdict
    times = [float(d["first_failure_s"] if d.get("first_failure_s") is not None else d["seconds"])
             for d in caught if d.get("seconds") is not None]
    verdicts = [float(d["seconds"]) for d in caught if d.get("seconds") is not None]
    cpu = [float(d["first_failure_cpu_s"]) for d in caught if d.get("first_failure_cpu_s") is not None]
    false_alarms = [a for a in runs if a["status"] == CAUGHT]
    return {
        "tester": tester,
        "unavailable": unavailable,
        "bugs": len(mine),
        "caught": len(caught),
        "skipped": sum(d["status"] == "skipped" for d in mine),
        "timeouts": sum(d["status"] == TIMEOUT for d in mine) + sum(a["status"] == TIMEOUT for a in runs),
        "errors": sum(d["status"] == "error" for d in mine) + sum(a["status"] == "error" for a in runs),
        "recall": len(caught) / len(mine) if mine else None,
        "detectable": len(detectable),
        "recall_detectable": len(caught_detectable) / len(detectable) if detectable else None,
        "missed": sorted(d["bug"] for d in detectable if d["status"] != CAUGHT),
        "runs": len(runs),
        "false_alarms": len(false_alarms),
        "false_alarm_cases": sorted({f"{a['subject']}[{a.get('case')}] seed {a['seed']}" for a in false_alarms}),
        "median_detect_s": _median(times),
        "max_detect_s": max(times) if times else None,
        "median_detect_cpu_s": _median(cpu),
        "max_detect_cpu_s": max(cpu) if cpu else None,
        "median_verdict_s": _median(verdicts),
        "max_verdict_s": max(verdicts) if verdicts else None,
        "detect_wall_s": sum(float(d.get("wall_s", 0.0)) for d in mine),
        "false_alarm_wall_s": sum(float(a.get("wall_s", 0.0)) for a in runs),
        "cpu_s": sum(float(r.get("cpu_s") or 0.0) for r in mine + runs),
    }
