"""Shared code for the PT2E Casebook notebooks.

Notebooks import from here everything that is not the lesson itself (version banners, parity
checks, expected-error checks, backends, third-party patches), so each page shows the model,
the error, the fix and the proof.
"""
