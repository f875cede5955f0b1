"""decomp.runtime.runs"""
