"""TaskLAMA task graphs: metrics (step matching, ROUGE, graph overlap), the
MSComplexTasks reader and simple baselines. See taskgraph/README.md."""
from decomp.taskgraph.data import ReadReport, linear, linear_closed, random_order, read_jsonl, read_mscomplextasks
from decomp.taskgraph.metrics import (
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
from decomp.taskgraph.similarity import (
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
