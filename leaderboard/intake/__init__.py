"""What a submission is, checked without the web service: archive reading and the
validator both `sumbench leaderboard submit --check` and the server run."""
