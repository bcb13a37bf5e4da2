"""The routes under /trials and /allocations: what a trial reports (metrics, logs, progress,
searcher operations, preemption) and what a user reads of one trial.

`_routes.py` joins them into the one route table.
"""

from __future__ import annotations

from master_lite.api import _allocations, _trials
from master_lite.api._declarations import Operation, Owner, Param, Route, TrialScope
from master_lite.api._openapi import (
    BOOLEAN,
    EMPTY,
    INTEGER,
    NUMBER,
    STRING,
    array,
    nullable,
    obj,
    ref,
)
from master_lite.api._schemas import (
    AFTER_ID,
    ALLOCATION_ID,
    EXPERIMENT_ANSWER,
    GZIP,
    LIMIT,
    MAX_DATAPOINTS,
    METRICS_ANSWER,
    METRICS_BODY,
    SIZE,
    TIMEOUT,
    TRIAL_ANSWER,
    TRIAL_EXPERIMENT_BODY,
    TRIAL_ID,
    is_plain_metrics_batch,
)

TRIAL_ROUTES: tuple[Route, ...] = (
    Route(
        "/trials/{trial_id}",
        _trials.TrialHandler,
        {"get": Operation("A trial", TRIAL_ANSWER)},
        (TRIAL_ID,),
    ),
    Route(
        "/trials/{trial_id}/rerun",
        _trials.TrialRerunHandler,
        {
            "post": Operation(
                "Re-run a trial with its hyperparameters: a new single-searcher experiment "
                "(from scratch) with the trial's experiment as its parent",
                EXPERIMENT_ANSWER,
                status=201,
                request=TRIAL_EXPERIMENT_BODY,
                auth_action="execute",
                owner=Owner.TRIAL,  # it runs the trial's code again: as downloading it
                verb="re-run",
            )
        },
        (TRIAL_ID,),
    ),
    Route(
        "/trials/{trial_id}/continue",
        _trials.TrialContinueHandler,
        {
            "post": Operation(
                "Continue a trial: a new single-searcher experiment with its hyperparameters, "
                "warm-started from its latest checkpoint (searcher.source_trial_id)",
                EXPERIMENT_ANSWER,
                status=201,
                request=TRIAL_EXPERIMENT_BODY,
                auth_action="execute",
                owner=Owner.TRIAL,
                verb="continue",
                description="400 when the trial has no checkpoint to continue from",
            )
        },
        (TRIAL_ID,),
    ),
    Route(
        "/trials/{trial_id}/notebook",
        _trials.TrialNotebookHandler,
        {
            "get": Operation(
                "The executed notebook of a notebook trial's latest run",
                GZIP,
                content_type="application/x-ipynb+json",
            )
        },
        (TRIAL_ID,),
    ),
    Route(
        "/trials/{trial_id}/kernel",
        _trials.TrialKernelHandler,
        {
            "get": Operation(
                "How to attach to a kernel trial's kernel",
                obj(
                    ["trial_id", "allocation_id", "state", "post_mortem"],
                    trial_id=INTEGER,
                    allocation_id=STRING,
                    state=STRING,
                    post_mortem=BOOLEAN,
                    kernel=obj(
                        ["ip", "transport", "shell_port", "iopub_port", "control_port", "key"],
                        ip=STRING,
                        transport=STRING,
                        key=STRING,
                        signature_scheme=STRING,
                        **{
                            f"{name}_port": INTEGER
                            for name in ("shell", "iopub", "stdin", "control", "hb")
                        },
                    ),
                    jupyter_kernel_id=STRING,
                    gateway=STRING,
                    kernel_id=STRING,
                    gateway_token=nullable(STRING),
                    kernel_spec=STRING,
                    pid=nullable(INTEGER),
                ),
                description=(
                    "How to reach the kernel running the trial's latest run, or kept for "
                    "post-mortem after it failed (environment.kernel.keep_alive): a local "
                    "kernel's Jupyter connection info (`kernel`: ports and key; "
                    "`jupyter_kernel_id` in a Jupyter-hosted master), or a Jupyter Gateway "
                    "kernel's `gateway` URL, `kernel_id` and `gateway_token` (the master's "
                    "token for that gateway, null when it has none; its websocket is "
                    "/api/kernels/{kernel_id}/channels). Anyone holding it can run code in the "
                    "kernel: users only (no trial tokens), authorized to execute. 409 when the "
                    "trial does not run in a kernel or its kernel is gone."
                ),
                auth_action="execute",
                owner=Owner.TRIAL,
                verb="attach to",
            )
        },
        (TRIAL_ID,),
    ),
    Route(
        "/trials/{trial_id}/kill",
        _trials.TrialKillHandler,
        {"post": Operation("Kill a trial", TRIAL_ANSWER, owner=Owner.TRIAL, verb="kill")},
        (TRIAL_ID,),
    ),
    Route(
        "/trials/{trial_id}/metrics",
        _trials.TrialMetricsHandler,
        {
            "get": Operation(
                "Metric reports of a trial",
                METRICS_ANSWER,
                query=(
                    Param("group", "string", "only this group, e.g. training"),
                    AFTER_ID,
                    LIMIT,
                    MAX_DATAPOINTS,
                ),
            ),
            "post": Operation(
                "Report metrics (Determined's form or a batch)",
                obj(["accepted"], accepted=INTEGER),
                request=METRICS_BODY,
                fast_accept=is_plain_metrics_batch,
                trial_scope=TrialScope.TRIAL,
                owner=Owner.TRIAL,  # a user token: the trial's owner or an admin
                verb="report to",
            ),
        },
        (TRIAL_ID,),
    ),
    Route(
        "/trials/{trial_id}/logs",
        _trials.TrialLogsHandler,
        {
            "get": Operation(
                "Log lines of a trial, ascending id",
                obj(["logs"], logs=array(ref("Log"))),
                query=(
                    AFTER_ID,
                    LIMIT,
                    Param("tail", "integer", "only the last N lines", minimum=0),
                    Param("rank", "integer", "only this rank", minimum=0),
                    Param(
                        "stream", "string", "only this stream", enum=("stdout", "stderr", "master")
                    ),
                ),
            )
        },
        (TRIAL_ID,),
    ),
    Route(
        "/trials/{trial_id}/progress",
        _trials.TrialProgressHandler,
        {
            "post": Operation(
                "Report training progress",
                EMPTY,
                trial_scope=TrialScope.TRIAL,
                owner=Owner.TRIAL,  # a user token: the trial's owner or an admin
                verb="report to",
                # Not bounded here: the facade clamps to 0..1, and a harness that
                # overshoots should not crash its trial over a progress bar.
                request=obj(
                    ["progress"],
                    progress={**NUMBER, "description": "fraction done, 0..1"},
                    is_raw=BOOLEAN,
                ),
            )
        },
        (TRIAL_ID,),
    ),
    Route(
        "/trials/{trial_id}/runner/metadata",
        _trials.RunnerMetadataHandler,
        {
            "post": Operation(
                "Report what the trial process is doing",
                EMPTY,
                trial_scope=TrialScope.TRIAL,
                owner=Owner.TRIAL,  # a user token: the trial's owner or an admin
                verb="report to",
                request=obj(["state"], state=STRING),
            )
        },
        (TRIAL_ID,),
    ),
    Route(
        "/trials/{trial_id}/early_exit",
        _trials.EarlyExitHandler,
        {
            "post": Operation(
                "Report that the trial exits early (400 if already reported)",
                EMPTY,
                trial_scope=TrialScope.TRIAL,
                owner=Owner.TRIAL,  # a user token: the trial's owner or an admin
                verb="report to",
                request=obj(
                    ["reason"],
                    reason={
                        **STRING,
                        "enum": ["EXITED_REASON_INVALID_HP", "EXITED_REASON_USER_REQUESTED_STOP"],
                    },
                ),
            )
        },
        (TRIAL_ID,),
    ),
    Route(
        "/trials/{trial_id}/searcher/operation",
        _trials.SearcherOperationHandler,
        {
            "get": Operation(
                "Long poll for the trial's next searcher operation",
                obj(
                    ["completed", "op"],
                    completed=BOOLEAN,
                    op=nullable(obj(validateAfter=obj(length=STRING))),
                ),
                trial_scope=TrialScope.TRIAL,
                query=(TIMEOUT,),
            )
        },
        (TRIAL_ID,),
    ),
    Route(
        "/trials/{trial_id}/searcher/completed_operation",
        _trials.CompletedOperationHandler,
        {
            "post": Operation(
                "Report a searcher operation done, with its metric",
                EMPTY,
                trial_scope=TrialScope.TRIAL,
                owner=Owner.TRIAL,  # a user token: the trial's owner or an admin
                verb="report to",
                request=obj(
                    ["op"], op=obj(["length"], length={**SIZE}), searcherMetric=nullable(NUMBER)
                ),
            )
        },
        (TRIAL_ID,),
    ),
    Route(
        "/allocations/{allocation_id}/signals/preemption",
        _allocations.PreemptionHandler,
        {
            "get": Operation(
                "Long poll: should this allocation stop (pause, kill)?",
                obj(["preempt"], preempt=BOOLEAN),
                trial_scope=TrialScope.ALLOCATION,
                query=(TIMEOUT,),
            )
        },
        (ALLOCATION_ID,),
    ),
    Route(
        "/allocations/{allocation_id}/signals/ack_preemption",
        _allocations.AckPreemptionHandler,
        {
            "post": Operation(
                "Acknowledge the preemption signal",
                EMPTY,
                trial_scope=TrialScope.ALLOCATION,
                owner=Owner.ALLOCATION,
                verb="report to",
            )
        },
        (ALLOCATION_ID,),
    ),
)
