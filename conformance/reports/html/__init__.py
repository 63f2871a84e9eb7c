"""kvcontract report: a check report as one self-contained HTML page."""
