// A stored tool: the sum of a list of numbers, computed by the everything backend's get_sum.
// Register it with `sandgate tools add examples/tools/sum_numbers.ts`, then call it as
// `await user.sum_numbers({ xs: [1, 2, 3] })` from call_tool_chain.
export const meta = {
  description: "Sum of a list of numbers, computed by the everything backend",
  input: {
    type: "object",
    properties: { xs: { type: "array", items: { type: "number" } } },
    required: ["xs"],
  },
  output: {
    type: "object",
    properties: { total: { type: "number" } },
    required: ["total"],
  },
  capabilities: { tools: ["everything.get_sum"], net: [], fs: [], env: [] },
};

export default async function (input: { xs: number[] }, ctx: any) {
  let total = 0;
  for (const x of input.xs) {
    // get_sum answers in words: "The sum of 1 and 2 is 3."
    const answer = String(await ctx.tools.everything.get_sum({ a: total, b: x }));
    total = Number(answer.match(/(-?\d+(?:\.\d+)?)\.?$/)![1]);
  }
  return { total };
}
