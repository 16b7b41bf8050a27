/**
 * Renders a selector rule's templated keys and values for one primary. A
 * rendered key or value that is not a valid label is a problem for that
 * primary — never a crash, and never a selector that matches everything.
 */

import { labelKeyProblem, labelValueProblem, type LabelSelector, type SelectorRequirement } from '../core/label-selector.js';
import type { TemplateContext } from './template.js';
import type { SelectorTemplate } from './rule.js';

export function renderSelector(
  requirements: readonly SelectorTemplate[],
  allowEmpty: boolean,
  context: TemplateContext,
  where: string,
): { selector?: LabelSelector; problems: string[] } {
  const problems: string[] = [];
  const rendered: SelectorRequirement[] = requirements.map((r) => {
    const key = r.key.render(context);
    const values = r.values.map((v) => v.render(context));
    const keyProblem = labelKeyProblem(key);
    if (keyProblem) problems.push(`${where}.${r.where.split('.selector.')[1] ?? r.where}: rendered ${keyProblem}`);
    for (const v of values) {
      const p = labelValueProblem(v);
      if (p) problems.push(`${where}.${r.where.split('.selector.')[1] ?? r.where}: rendered ${p}`);
    }
    return { key, operator: r.operator, values };
  });
  if (rendered.length === 0 && !allowEmpty) problems.push(`${where}: the selector is empty`);
  return problems.length > 0 ? { problems } : { selector: { requirements: rendered }, problems };
}
