//! The cwl lab: importers for real session logs, baseline context policies,
//! metrics and reports.
