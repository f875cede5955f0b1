"""decomp.runtime.engine"""
