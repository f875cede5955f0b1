"""decomp.runtime.views"""
