// A stored tool: a short digest of text files served by the filesystem backend (lines, words,
// the first heading), for several files at once.
export const meta = {
  description: "Digest text files: line and word counts and the first heading of each",
  input: {
    type: "object",
    properties: { paths: { type: "array", items: { type: "string" }, minItems: 1, maxItems: 20 } },
    required: ["paths"],
  },
  output: {
    type: "array",
    items: {
      type: "object",
      properties: {
        path: { type: "string" },
        lines: { type: "integer" },
        words: { type: "integer" },
        heading: { type: ["string", "null"] },
      },
      required: ["path", "lines", "words", "heading"],
    },
  },
  capabilities: { tools: ["filesystem.read_text_file"] },
};

export default async function (input: { paths: string[] }, ctx: any) {
  const texts = await Promise.all(
    input.paths.map((path) => ctx.tools.filesystem.read_text_file({ path })),
  );
  return input.paths.map((path, i) => {
    // The filesystem server answers with { content } (its structured result), older ones
    // with the text itself.
    const answer = texts[i];
    const text: string = typeof answer === "string" ? answer : String(answer.content ?? "");
    const lines = text.split("\n").filter((l) => l.length > 0);
    const heading = lines.find((l) => l.startsWith("#")) ?? null;
    return {
      path,
      lines: lines.length,
      words: text.split(/\s+/).filter(Boolean).length,
      heading: heading === null ? null : heading.replace(/^#+\s*/, ""),
    };
  });
}
