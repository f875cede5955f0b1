"""decomp.programs.tasklama"""
