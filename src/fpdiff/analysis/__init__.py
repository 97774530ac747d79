"""The analyses' logic on the judging floor: check, locate, ranges, plan, ops and fuzz, each a package the API hands
on through its declaration (fpdiff/analyses/)."""
