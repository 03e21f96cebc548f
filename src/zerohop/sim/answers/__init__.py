"""What a request asks and what its answer says, as bytes: `body_forms` (one registry
entry per request body form; `builtin_forms` the four shipped), `request_fields`,
`api_routes`, the wire shapes (`api_shapes`, `responses_shape`, `answer_shapes`), the
answer's plan (`answer_plan`, `structured_answer`, `greedy_answer`), and the tokenizer
(`tokens`, `tokenize`, `image_parts`)."""
