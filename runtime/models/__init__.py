"""decomp.runtime.models"""
