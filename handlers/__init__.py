"""Handler kinds (one module each: prompt, decomposer, regex, calculator, python, score), the
registry they and third-party kinds register in, and the interface they see of the engine: the
`Call` they receive (call) and the outbound `Service` base (service)."""
