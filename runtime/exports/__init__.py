"""Runs sent elsewhere as they happen: each row's tree as OpenTelemetry spans over OTLP.

    otel.py         OpenTelemetry export of each row's tree over OTLP
    otel_sender.py  the process that sends a dataset run's traces
"""
