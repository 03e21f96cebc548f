"""The results folder: the one place its file names are written down.

    <results>/<UTC stamp>-<name>/
        manifest.json        what ran, against what, how it ended (schema MANIFEST_SCHEMA)
        records/*.jsonl      one crash-safe sink per load-generator process
        requests.parquet     the records, consolidated at the end of the run
        telemetry/*.jsonl    one sink per telemetry sampler
        telemetry.parquet    the samples, consolidated
        microbench.json      the GPU microbenchmarks, when a CUDA device was there
        locust.log           Locust's own log (the cause of a refused run is read here)
        report.html          the report
        summary.json         the run's figures for scripts (docs/summary-json.md)
        results.csv          the results block (counts, throughput, latencies) for spreadsheets
        selfcheck.json       the client's certificate (`zerohop selfcheck`, `run --selfcheck`)
        ground_truth.jsonl   a self-check's record of what the embedded target sent
        probe/               the interference probe's records (*.jsonl) and phases.json
        live/*.jsonl         one line a second per load generator: the saturation feed
        answers.json         the answer probe's prompts and answers, alone and under load
"""

from __future__ import annotations

MANIFEST_FILE = "manifest.json"
MANIFEST_SCHEMA = "zerohop.run"
RECORDS_DIR = "records"
REQUESTS_FILE = "requests.parquet"
TELEMETRY_DIR = "telemetry"
TELEMETRY_FILE = "telemetry.parquet"
MICROBENCH_FILE = "microbench.json"
LOCUST_LOG = "locust.log"
REPORT_FILE = "report.html"
SUMMARY_FILE = "summary.json"
RESULTS_CSV_FILE = "results.csv"  # the console's results block as a table
SELFCHECK_FILE = "selfcheck.json"
PLAN_FILE = "plan.json"  # the run's settings, redacted; the Locust process reads them
GROUND_TRUTH_FILE = "ground_truth.jsonl"
LIVE_DIR = "live"  # the saturation detector's live feed (loadgen/saturation_feed.py)
PROBE_DIR = "probe"  # `--probe-rate`: kept apart from records/, out of the main statistics
PROBE_PHASES_FILE = "phases.json"
# open-loop arrivals a --max-concurrency cap held until the run ended: offered, never
# sent; kept apart from records/ (no figure but the offered rate reads them)
NOT_SENT_DIR = "not_sent"
ANSWERS_FILE = "answers.json"  # `--answer-probe`: its answers, out of the main statistics

# manifest key: when a signal (or a stop before the end) cut the load short, in the
# records' wall clock; absent for a run that offered its whole planned duration
LOAD_STOPPED_KEY = "load_stopped_ts"
# manifest key: the live saturation verdict `--stop-when-saturated` ended the load on,
# with `stopped_at_s` and `planned_s` (runner/saturation_watch.py)
SATURATION_STOP_KEY = "saturation_stop"
