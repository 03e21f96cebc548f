"""No code: this marks report_templates/ as the package
`zerohop.shipped.report_templates`, so every install carries the templates and static
assets (setup.py says how)."""
