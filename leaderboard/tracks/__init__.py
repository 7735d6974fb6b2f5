"""Leaderboard tracks by name: `usb` (eight USB tasks on hidden test gold), `summaries`
(Pyramid-scored system summaries) and `evaluators` (metrics ranked by agreement with humans)."""
from __future__ import annotations

from leaderboard.tracks.base import PartScore, SubmissionErrors, Track
from tasks.plumbing.errors import check_choice

TRACK_NAMES = ("usb", "summaries", "evaluators")


def make_track(name: str, evaluators=None, strict_lengths: bool = True) -> Track:
    """The track called `name`; `evaluators` configures the summaries track,
    `strict_lengths` the usb track."""
    # a track's module is imported when the track is first made: the summaries and
    # evaluators tracks bring ROUGE and NLTK, which a usb board or a client never needs
    check_choice(name, TRACK_NAMES, "track")
    if name == "usb":
        from leaderboard.tracks.usb import UsbTrack
        return UsbTrack(strict_lengths)
    if name == "summaries":
        from leaderboard.tracks.summaries import SummariesTrack
        return SummariesTrack(evaluators)
    from leaderboard.tracks.evaluators import EvaluatorsTrack  # the last of TRACK_NAMES
    return EvaluatorsTrack()


__all__ = ["PartScore", "SubmissionErrors", "TRACK_NAMES", "Track", "make_track"]
