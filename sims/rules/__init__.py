"""Update rules as small composable transforms on batched ``[B, d]`` state."""
