"""ARPA back-off files, the format's home: what a file holds, the rules its writer and its reader keep, and the
values both use. The writer (baselines.arpa_writer) writes a BackoffModel; the reader (baselines.arpa_reader)
reads one back as a LanguageModel over a Vocabulary, from the sections that baselines.arpa_parser parses out of
the file's bytes.

Public API
----------
`arpa_writer.write_arpa(model, vocab, path)`: any BackoffModel (the fitted model of every method registered `arpa`,
    baselines.methods) to a standard ARPA file; returns the n-gram counts per order written in the header.
`arpa_reader.read_arpa(path, vocab)` -> `ArpaModel`: the file as a BackoffModel over `vocab`, scored like any
    model (`lmbench.model.split_logprobs(model, corpus, split)`); it scores exactly as the model that wrote it (up to the printed digits).
`arpa_reader.read_arpa_own(path)` -> (`ArpaModel`, `Vocabulary`): the file over the words of its
    unigrams, read once (`lmbench build-binary`, `reports.api.load`).
`arpa_reader.read_arpa_header(path)`: {order: count} of the `\\data\\` section.
`arpa_reader.read_arpa_words(path)`: the words of its unigrams, the vocabulary it holds (`reports.api.load` reads
    a file over them).

Format (SRILM / KenLM conventions):

    \\data\\
    ngram 1=17907
    ngram 2=...
                                         (blank line)
    \\1-grams:
    log10 P(w) <TAB> w <TAB> log10 bow(w)
    ...
    \\N-grams:
    log10 P(w_N | w_1 .. w_N-1) <TAB> w_1 ... w_N
    \\end\\

Words are the vocabulary strings; every word of V, <unk> included, is a unigram. Our streams have
no sentence markers, but KenLM refuses a file without <s>: <s> and </s> (unless V holds them) are
listed as unigrams of probability 0 (-99), no n-gram holds them, and reading drops them. Back-off weights
are written for every n-gram of order < N (0 where the n-gram is no context). A zero probability or
weight is written as -99, ARPA's log10(0). Values carry 8 decimals (a relative error of at most
1.2e-8 per probability, far inside the 1e-4 perplexity tolerance of a round trip).

Reading: words of V missing from the file take <unk>'s unigram probability (KenLM's rule); n-grams
holding a word outside V (e.g. lmplz's <s> and </s>) are dropped, with a log line. A damaged file
(not UTF-8, a section shorter than its header announces, a malformed number, a number that is not
finite as read or as converted to a natural log (|log10| above arpa_parser.LOG10_RANGE, about 7.8e307), a log10
probability above 0, no closing `\\end\\`, an order of arpa_parser.ROWS_MAX n-grams or more) is refused in one
line naming the file (lmbench.files.DamagedFile), and so is one that is no model, read over its own words before
V's: an n-gram listed twice at any order, an n-gram of a word that is none of its unigrams, or a context whose
distribution does not sum to 1 (within arpa_reader.SUM_TOLERANCE; every context of every order, in one compiled
pass an order).
A section begins at a line of its own: a word such as
`\\2-grams:` (a token of a corpus) inside an entry is written and read as the word it is. Writing is atomic.
"""

import numpy as np

# (the writer's, the parser's and reports.api's: log10 <-> natural logs, and ARPA's log10(0))
LN10 = np.log(10.0)
LOG10_ZERO = -99.0
