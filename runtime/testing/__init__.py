"""decomp.runtime.testing"""
