"""The tree softmax (Morin & Bengio 2005; the hierarchical output layer section 7 of the paper
proposes): a binary tree whose V leaves are the words, and

    P(w | h) = prod_{(n, d) on the path from the root to w} sigmoid(d (a_n . z + c_n))

with one vector a_n (K,) and bias c_n per internal node n (V - 1 of them), d = +1 where the path goes
to the node's first child and -1 to its second. At every node the two children's probabilities
sigmoid(s) and sigmoid(-s) sum to 1, so P sums to 1 over V for every context, exactly: no
normalisation is computed. A training token or an exact target score costs one dot product per node
on its path, |path(w)| K multiply-adds, instead of the full softmax's |V| K.

The tree (`word_tree`, from the training split only):
- "frequency" (default): the Huffman tree of the add-one train counts, so the expected path length
  is within one node of the unigram entropy in bits (Brown: ~10 nodes a token against log2 |V| = 14.1
  for a balanced tree), the frequent words near the root.
- "exchange" (`--class-source exchange`): the classes of the exchange clustering (`neural.outputs.classes`,
  `--classes`, default sqrt |V|) as the tree's top: a Huffman tree over the classes by their mass,
  then below each class the Huffman tree of its words, so that words of one class share their upper
  decisions.

The tree is kept as `structure` (V - 1, 2) int64: the two children of each internal node, a leaf as
the word id w, an internal node i as V + i; node 0 is the root and every node comes after its parent.
The paths (`paths`, `signs`, `depth`) are rebuilt from it, not saved. The whole distribution (B, V)
is computed top-down, one level of the tree at a time: log P(child) = log P(node) + log sigmoid(+-s),
the same float64 additions in the same order as a target's sum along its path, so `log_probs` of a
target and of the whole distribution agree to the last bit.
"""

from __future__ import annotations

import heapq
from collections import deque

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from neural.outputs.layers import OutputLayer, csr_matrix


def huffman_merges(weights: np.ndarray) -> list[tuple[int, int]]:
    """The merges of Huffman's algorithm over items 0 .. N-1 of `weights` (N,): the two lightest items
    (ties: the older first), merged into item N, N + 1, ..., in order; N - 1 merges."""
    heap = [(float(w), i) for i, w in enumerate(weights)]
    heapq.heapify(heap)
    merges, next_id = [], len(weights)
    while len(heap) > 1:
        (w1, a), (w2, b) = heapq.heappop(heap), heapq.heappop(heap)
        merges.append((a, b))
        heapq.heappush(heap, (w1 + w2, next_id))
        next_id += 1
    return merges


def huffman_tree(counts: np.ndarray, groups: np.ndarray | None = None) -> np.ndarray:
    """The (V - 1, 2) children of the Huffman tree of word weights `counts` (V,) in the layout of
    `structure` (root first, parents before children); with `groups` (V,) class ids, a Huffman tree
    over the classes by their total weight with each class's Huffman tree of words below it."""
    vocab = len(counts)
    if vocab < 2:
        raise ValueError("a tree needs at least 2 words")
    children = []  # (left, right) of each merge, items: words 0 .. V-1, merges V, V + 1, ...
    if groups is None:
        children = huffman_merges(counts)
    else:
        tops = []  # the item at the top of each class's subtree
        for c in range(int(groups.max()) + 1):
            words = np.flatnonzero(groups == c)
            if len(words) == 1:
                tops.append(int(words[0]))
                continue
            base = vocab + len(children)  # this class's merges are numbered from here
            local = huffman_merges(counts[words])
            item = lambda i: int(words[i]) if i < len(words) else base + i - len(words)  # noqa: E731
            children += [(item(a), item(b)) for a, b in local]
            tops.append(base + len(local) - 1)
        base = vocab + len(children)
        mass = np.array([counts[groups == c].sum() for c in range(len(tops))], dtype=np.float64)
        item = lambda i: tops[i] if i < len(tops) else base + i - len(tops)  # noqa: E731
        children += [(item(a), item(b)) for a, b in huffman_merges(mass)]
    # renumber the V - 1 merges so that the root (the last merge) is node 0 and parents come first
    order, queue = [], deque([vocab + len(children) - 1])
    while queue:  # breadth first from the root
        node = queue.popleft()
        order.append(node)
        queue += [child for child in children[node - vocab] if child >= vocab]
    renumber = {old: vocab + new for new, old in enumerate(order)}
    return np.array([[renumber.get(child, child) for child in children[old - vocab]] for old in order],
                    dtype=np.int64)


def word_tree(corpus, config, *, progress: bool = True) -> torch.Tensor:
    """The tree of the objective "tree" for corpus.vocab (the module docstring), from train only."""
    counts = np.bincount(corpus.train, minlength=len(corpus.vocab)) + 1.0  # add-one: every word a leaf
    groups = None
    if config.class_source == "exchange":
        from neural.outputs.classes import word_classes
        groups = word_classes(corpus, config, progress=progress).numpy()
    return torch.from_numpy(huffman_tree(counts, groups))


class TreeLayer(OutputLayer):
    """P(w | h) as the product of the sigmoid decisions on the path to w (the module docstring), over
    the tree `structure` (V - 1, 2)."""

    name = "tree"

    def __init__(self, vocab_size: int, width: int, structure: torch.Tensor):
        super().__init__(vocab_size, width)
        tree = torch.as_tensor(structure).to(torch.int64)
        if tree.shape != (vocab_size - 1, 2) or not check_tree(tree.numpy(), vocab_size):
            raise ValueError(f"a tree over {vocab_size} words is (V - 1, 2) children, each word a leaf once, "
                             f"the internal nodes numbered breadth first; got {tuple(tree.shape)}")
        self.register_buffer("structure", tree.clone())
        paths = tree_paths(tree.numpy(), vocab_size)
        if np.any(np.diff(paths["node_depth"]) < 0):
            raise ValueError("the internal nodes of a tree are numbered breadth first (by depth)")
        self.max_depth = int(paths["depth"].max())
        for name, value in paths.items():  # rebuilt from the tree, not saved
            self.register_buffer(name, torch.from_numpy(value), persistent=False)
        self.levels = level_slices(paths["node_depth"])  # the internal nodes of each depth, a slice each
        self.node_out = nn.Parameter(torch.empty(vocab_size - 1, width))  # (V - 1, K) a_n
        self.node_b = nn.Parameter(torch.empty(vocab_size - 1))  # (V - 1,) c_n

    def reset_parameters(self) -> None:
        """a_n ~ U(-1/sqrt(K), 1/sqrt(K)); c_n = 0."""
        nn.init.uniform_(self.node_out, -self.width ** -0.5, self.width ** -0.5)
        nn.init.zeros_(self.node_b)

    @torch.no_grad()
    def set_unigram_biases(self, unigram: torch.Tensor) -> None:
        """c_n = log(q(first subtree) / q(second subtree)), so that P(w | h) = q_w while a_n . z is small."""
        vocab = self.vocab_size
        mass = torch.cat([unigram.double().cpu(), torch.zeros(vocab - 1, dtype=torch.float64)])  # (2V - 1,)
        tree = self.structure.cpu()
        for node in range(vocab - 2, -1, -1):  # children come after their parents: bottom up
            mass[vocab + node] = mass[tree[node]].sum()
        self.node_b.copy_((mass[tree[:, 0]].log() - mass[tree[:, 1]].log()).to(self.node_b))

    def decay_parameters(self) -> list[nn.Parameter]:
        return [self.node_out]

    def bias_parameters(self) -> list[nn.Parameter]:
        return [self.node_b]

    def path_entries(self, target: torch.Tensor):
        """The nodes (T,) and signs (T,) of the paths of the targets (B,), one after another, root
        first, and the example (T,) and the place on its path (T,) of each entry; T = sum of depths."""
        size = self.depth[target]  # (B,)
        runs = F.pad(torch.cumsum(size, 0), (1, 0))  # (B + 1,)
        total = int(runs[-1])
        owner = torch.repeat_interleave(torch.arange(len(target), device=target.device), size,
                                        output_size=total)  # (T,)
        place = torch.arange(total, device=target.device) - runs[:-1].index_select(0, owner)  # (T,)
        at = self.path_start[target].index_select(0, owner) + place  # (T,) entries of the flat paths
        return self.path_nodes[at], self.path_signs[at], owner, place, runs

    def loss(self, z: torch.Tensor, target: torch.Tensor, bf16: bool = False) -> torch.Tensor:
        """Mean over the batch of -log P(target | h) = -sum_path log sigmoid(d (a_n . z + c_n)): one
        dot product per node on the path; the gradient of a_n is sparse (the rows on the batch's
        paths). bf16 is ignored (no |V|-sized GEMM)."""
        nodes, signs, owner, _, _ = self.path_entries(target)
        rows = F.embedding(nodes, self.node_out, sparse=True)  # (T, K)
        scores = (z.index_select(0, owner) * rows).sum(dim=1) + self.node_b[nodes]  # (T,)
        return -F.logsigmoid(signs.to(scores.dtype) * scores).sum() / len(target)

    def log_probs(self, z: torch.Tensor, target: torch.Tensor | None = None, *, bf16: bool = False,
                  full_softmax: bool = False) -> torch.Tensor:
        """float64 log P(target | h) (B,), or log P(. | h) (B, V) when target is None. Every node's score
        is the dot product of its own two rows (`node_scores`), so it does not depend on the batch; the
        log sigmoids are summed in float64 from the root down, in the same order in both forms."""
        if full_softmax:
            raise ValueError("a tree output layer has no word scores y to take the full softmax of")
        batch = len(z)
        if target is not None:
            nodes, signs, owner, place, runs = self.path_entries(target)
            scores = self.node_scores(z, nodes, runs)  # (T,)
            steps = torch.zeros(batch, self.max_depth, dtype=torch.float64, device=z.device)
            steps[owner, place] = F.logsigmoid(signs.double() * scores.double())  # (B, D), 0 past a path's end
            total = torch.zeros(batch, dtype=torch.float64, device=z.device)
            for column in steps.t():  # root first, one addition a node
                total = total + column
            return total
        every = torch.arange(self.vocab_size - 1, device=z.device)
        runs = torch.arange(0, batch * len(every) + 1, len(every), device=z.device)  # (B + 1,)
        scores = self.node_scores(z, every.repeat(batch), runs).view(batch, -1).double()  # (B, V - 1)
        log_p = torch.zeros(batch, 2 * self.vocab_size - 1, dtype=torch.float64, device=z.device)  # items
        for level in self.levels:  # parents before children
            s, above = scores[:, level], log_p[:, self.vocab_size + level.start: self.vocab_size + level.stop]
            log_p[:, self.structure[level, 0]] = above + F.logsigmoid(s)
            log_p[:, self.structure[level, 1]] = above + F.logsigmoid(-s)
        return log_p[:, : self.vocab_size]

    def node_scores(self, z: torch.Tensor, nodes: torch.Tensor, runs: torch.Tensor) -> torch.Tensor:
        """a_n . z_i + c_n (T,) for the entries `nodes` (T,) in runs (B + 1,) of the examples of z (B, K):
        a sampled matrix product, each entry the dot product of its own two rows."""
        mask = csr_matrix(runs, nodes, self.node_b[nodes], (len(z), len(self.node_out)))
        return torch.sparse.sampled_addmm(mask, z, self.node_out.t()).values()

    def scores(self, z: torch.Tensor) -> torch.Tensor:
        """log P(. | h) (B, V) in z's dtype: scores whose softmax is the distribution itself."""
        return self.log_probs(z).to(z.dtype)


def check_tree(tree: np.ndarray, vocab: int) -> bool:
    """Every item but the root (words 0 .. V-1, internal nodes V + 1 ..) a child exactly once, and every
    internal node after its parent."""
    items = tree.reshape(-1)
    if np.any(items < 0) or np.any(items >= 2 * vocab - 1) or np.any(items == vocab):
        return False
    if not np.array_equal(np.sort(items), np.delete(np.arange(2 * vocab - 1), vocab)):
        return False
    parents = np.repeat(np.arange(vocab - 1), 2)
    internal = items >= vocab
    return bool(np.all(items[internal] - vocab > parents[internal]))


def tree_paths(tree: np.ndarray, vocab: int) -> dict[str, np.ndarray]:
    """The paths of the words, root first, laid out flat: path_nodes and path_signs (sum of depths,)
    (sign +1 to the first child, -1 to the second), path_start (V,) and depth (V,) of each word, and
    node_depth (V - 1,) of each internal node (the root 0)."""
    parent = np.empty(2 * vocab - 1, dtype=np.int64)
    side = np.empty(2 * vocab - 1, dtype=np.float32)
    parent[tree[:, 0]], parent[tree[:, 1]] = np.arange(vocab - 1), np.arange(vocab - 1)
    side[tree[:, 0]], side[tree[:, 1]] = 1.0, -1.0
    node_depth = np.zeros(vocab - 1, dtype=np.int64)
    for node in range(1, vocab - 1):  # parents first
        node_depth[node] = node_depth[parent[vocab + node]] + 1
    depth = node_depth[parent[:vocab]] + 1  # (V,)
    path_start = np.concatenate([[0], np.cumsum(depth)[:-1]])
    path_nodes = np.empty(depth.sum(), dtype=np.int64)
    path_signs = np.empty(depth.sum(), dtype=np.float32)
    item, place = np.arange(vocab), depth.copy()  # walk every word up to the root at once
    while np.any(place > 0):
        going = place > 0
        place[going] -= 1
        at = path_start[going] + place[going]
        path_nodes[at], path_signs[at] = parent[item[going]], side[item[going]]
        item[going] = vocab + parent[item[going]]
    return {"path_nodes": path_nodes, "path_signs": path_signs, "path_start": path_start, "depth": depth,
            "node_depth": node_depth}


def level_slices(node_depth: np.ndarray) -> list[slice]:
    """The internal nodes of each depth as a slice: breadth-first numbering keeps each level contiguous."""
    edges = np.flatnonzero(np.diff(node_depth)) + 1
    bounds = [0, *edges.tolist(), len(node_depth)]
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]
