"""TaskLAMA task graphs: metrics, the MSComplexTasks reader, baselines. See programs/tasklama/taskgraph/README.md.

    baselines.py    gold rows and the Linear / random-order baselines written, their metrics printed
    commands.py     `decomp eval steps` and `decomp eval graph`, a plugin
    data.py         task-graph rows, the MSComplexTasks reader, the baselines' graphs
    metrics.py      TaskLAMA's metrics: step matching, ROUGE, graph overlap
    scorer.py       the S&F scorer: a ridge regression over embeddings
    similarity.py   step similarity S(u, v) for the metrics
    splits.py       fixed, seeded splits of MSComplexTasks
    tuning_rows.py  training rows for TaskLAMA's soft prompts
"""
from decomp.programs.tasklama.taskgraph.data import ReadReport, linear, linear_closed, random_order, read_jsonl, read_mscomplextasks
from decomp.programs.tasklama.taskgraph.metrics import (
                      Scores,
                      evaluate_graphs,
                      evaluate_steps,
                      fbeta,
                      graph_scores,
                      hungarian,
                      in_degree,
                      match_nodes,
                      one_to_many,
                      out_degree,
                      proximity,
                      relaxed,
                      rouge_scores,
                      to_graph,
)
from decomp.programs.tasklama.taskgraph.similarity import (
                      EncoderSimilarity,
                      ExactSimilarity,
                      MatrixSimilarity,
                      Similarity,
                      get_similarity,
)

__all__ = [
    "EncoderSimilarity", "ExactSimilarity", "MatrixSimilarity", "ReadReport", "Scores", "Similarity",
    "evaluate_graphs", "evaluate_steps", "fbeta", "get_similarity", "graph_scores", "hungarian",
    "in_degree", "linear", "linear_closed", "match_nodes", "one_to_many", "out_degree", "proximity", "random_order",
    "read_jsonl", "read_mscomplextasks", "relaxed", "rouge_scores", "to_graph",
]
