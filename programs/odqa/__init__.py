"""Open-domain multi-hop QA programs (odqa.decomp), their prompts, a small corpus and questions."""
