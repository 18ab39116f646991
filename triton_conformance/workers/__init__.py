"""Where cells run: replaceable worker processes, the executor that classifies what they report,
the sanitizer mode, and GPU claims for xdist workers."""
