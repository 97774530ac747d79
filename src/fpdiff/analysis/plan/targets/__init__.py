"""The formats a verified plan ships in, one file each, each declared as an ExportTarget and registered through the
`fpdiff.plan_exports` entry points as a user's target would be (plan/exports.py reads them)."""
