"""Which hidden test items a board hosts, and which of them it publishes.

Two decisions, both made per article (an item's `id`: every item of one article goes the same
way, or per summary sentence, below) and keyed by the instance's secret, so nobody outside can
tell them:

- **Linked parts.** A part whose public inputs give another part's gold away on the same
  articles (`Link`, found by the track) is hosted on other articles than that part: the parts
  are coloured so that no two linked parts share a colour (greedy, most links first), and
  each domain's articles are dealt among the colours. With `keep_linked` every part keeps
  every article and the linked ones say so (`inferable_from`).
- **Public / private.** Of each part's item groups in each domain (the `id` prefix before
  `/`), floor(`private_fraction` x n) are private: scored and stored, published only after
  `reveal`. A group is what no other item of the part may be apart from: the items of one
  summary sentence (`summ_idx`: a FAC pair's two records, whose labels are complementary) or
  of one article. The choice is the same on every board (an `all` board and a domain board
  share items).
"""
from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Link:
    """Part `revealer`'s public inputs give away the gold of `revealed` of `victim`'s
    `victim_items` items on a board."""
    board: str
    revealer: str
    victim: str
    revealed: int
    victim_items: int

    def to_dict(self) -> dict:
        return {"board": self.board, "revealer": self.revealer, "victim": self.victim,
                "revealed": self.revealed, "of": self.victim_items}


def keyed_rng(secret: str, *labels: object) -> np.random.Generator:
    """A generator seeded by the secret and the labels (nobody without the secret can
    reproduce its draws)."""
    message = json.dumps([str(label) for label in labels]).encode()
    digest = hmac.new(secret.encode(), message, hashlib.sha256).digest()
    return np.random.default_rng(int.from_bytes(digest[:16], "big"))


def domain_of(article: str) -> str:
    return article.split("/", 1)[0] if "/" in article else ""


def by_domain(articles: Iterable[str]) -> dict[str, list[str]]:
    """domain -> its articles, sorted (the order every draw starts from)."""
    domains: dict[str, set[str]] = {}
    for article in articles:
        domains.setdefault(domain_of(article), set()).add(article)
    return {domain: sorted(names) for domain, names in sorted(domains.items())}


def colour_parts(parts: Sequence[str], links: Iterable[Link]) -> dict[str, int]:
    """part -> colour, no two linked parts alike: greedy over parts with most links first
    (ties by name), each taking the smallest colour its coloured neighbours leave."""
    neighbours: dict[str, set[str]] = {part: set() for part in parts}
    for link in links:
        if link.revealer in neighbours and link.victim in neighbours:
            neighbours[link.revealer].add(link.victim)
            neighbours[link.victim].add(link.revealer)
    colours: dict[str, int] = {}
    for part in sorted(parts, key=lambda name: (-len(neighbours[name]), name)):
        taken = {colours[other] for other in neighbours[part] if other in colours}
        colours[part] = next(colour for colour in range(len(parts) + 1) if colour not in taken)
    return colours


def deal_articles(articles: Iterable[str], n_groups: int, secret: str,
                  seed: int) -> dict[str, int]:
    """article -> group: each domain's articles shuffled (keyed) and dealt round-robin, the
    first card of each domain going to the next group, so groups stay even across domains."""
    groups: dict[str, int] = {}
    for offset, (domain, names) in enumerate(by_domain(articles).items()):
        order = keyed_rng(secret, "linked", seed, domain).permutation(len(names))
        for position, index in enumerate(order):
            groups[names[index]] = (offset + position) % n_groups
    return groups


def private_groups(groups: Iterable[str], fraction: float, secret: str, seed: int,
                   part: str) -> frozenset[str]:
    """The part's private item groups: floor(fraction x n) of each domain's n, drawn keyed."""
    chosen: set[str] = set()
    if fraction <= 0:
        return frozenset()
    for domain, names in by_domain(groups).items():
        count = int(fraction * len(names))
        order = keyed_rng(secret, "private", seed, part, domain).permutation(len(names))
        chosen.update(names[index] for index in order[:count])
    return frozenset(chosen)


def content_sha256(payload: Mapping) -> str:
    """The hosted payload's digest (the stored part's digest changes with what is hosted)."""
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def opaque_id(secret: str, *values: object) -> str:
    """A stable id of the values that reveals nothing of them without the secret (version ids
    of hidden gold: a plain digest could be confirmed by enumerating small label sets)."""
    message = json.dumps([str(value) for value in values]).encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()[:24]


@dataclass(frozen=True)
class Hosting:
    """How a track's boards are hosted: the instance's rule and secret."""
    keep_linked: bool
    private_fraction: float
    secret: str
    seed: int


def item_group(item: Mapping) -> str:
    """The article, and the summary sentence where the item has one: `id#summ_idx`."""
    return f"{item['id']}#{item['summ_idx']}" if "summ_idx" in item else str(item["id"])


def host_boards(gold: Mapping[str, Mapping[str, dict]], key: str, article: Callable[[dict], str],
                links: Sequence[Link], hosting: Hosting) -> dict[str, dict[str, dict]]:
    """board -> part -> hosted payload: the payload's `key` items filtered to the part's
    articles (all of them with `keep_linked`), with `private` (sorted item indices), `linked`
    (what the linked-parts rule did: the parts whose inputs give its gold away, and whether
    it is hosted apart from them) and the `sha256` of what is hosted."""
    parts = sorted({part for board in gold.values() for part in board})
    every_article = {article(item) for board in gold.values() for payload in board.values()
                     for item in payload[key]}
    colours = colour_parts(parts, links)
    n_groups = 1 if hosting.keep_linked else max(colours.values(), default=0) + 1
    groups = deal_articles(every_article, n_groups, hosting.secret, hosting.seed)
    hosted_articles = {part: {name for name in every_article
                              if n_groups == 1 or groups[name] == colours[part]}
                       for part in parts}
    groups_of = {part: {item_group(item) for board in gold.values()
                        for item in board.get(part, {}).get(key, ())
                        if article(item) in hosted_articles[part]} for part in parts}
    private = {part: private_groups(groups_of[part], hosting.private_fraction, hosting.secret,
                                    hosting.seed, part) for part in parts}
    hosted: dict[str, dict[str, dict]] = {}
    for board, board_parts in gold.items():
        for part, payload in board_parts.items():
            kept = [item for item in payload[key] if article(item) in hosted_articles[part]]
            revealers = sorted({link.revealer for link in links if link.victim == part})
            hosted.setdefault(board, {})[part] = _hosted_payload(
                payload, key, kept,
                [i for i, item in enumerate(kept) if item_group(item) in private[part]],
                revealers, n_groups)
    return hosted


def _hosted_payload(payload: Mapping, key: str, kept: list, private: list[int],
                    revealers: list[str], n_groups: int) -> dict:
    hosted = {**payload, key: kept, "private": private}
    if revealers:
        hosted["linked"] = {"inferable_from": revealers, "hosted_apart": n_groups > 1,
                            "article_groups": n_groups}
    hosted["sha256"] = content_sha256({k: v for k, v in hosted.items() if k != "sha256"})
    return hosted
