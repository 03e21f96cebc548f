"""Not a locustfile (Locust skips files whose names start with "_"): this marks
loadtests/ as the package `zerohop.shipped.loadtests`, so every install carries these
files and `zerohop locustfile` can point Locust at them (setup.py says how)."""
