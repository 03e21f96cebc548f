"""No code: this marks workloads/ as the package `zerohop.shipped.workloads`, so every
install carries these files and runs find the default workloads (setup.py says how)."""
