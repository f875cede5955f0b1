"""Metrics and statistics: answers scored against gold, predictions evaluated, runs compared.

    compare.py       runs compared with confidence intervals (`decomp compare`)
    evaluation.py    predictions scored against gold rows (`decomp eval`)
    metric_calls.py  a user's metric function, called in a worker process
    metrics.py       answers scored as DROP's evaluator does (em, f1, set match), and the
                     metrics plugins and users add
"""
