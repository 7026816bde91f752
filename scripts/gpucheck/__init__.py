"""`scripts/gpu-check.sh`: one budgeted command that proves opgate's GPU path step by step (stdlib only).

The orchestrator (`python -m scripts.gpucheck`) imports nothing outside the standard library, so it runs,
and writes its summary, before and even when its setup step cannot install opgate's dependencies.
"""
