"""Measurement: the timing loop every scheme shares, and the statistics over its raw samples."""
