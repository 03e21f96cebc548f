"""The one error a results folder the analysis cannot read raises: its message is one
line for the user (`zerohop report` and `zerohop run` print it, exit 2)."""


class ReportInputError(ValueError):
    """A results folder the report cannot read; the message is one line for the user."""
